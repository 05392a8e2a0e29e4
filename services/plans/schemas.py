from __future__ import annotations

from datetime import datetime
from typing import Annotated

from pydantic import BaseModel, Field, WithJsonSchema, field_validator, model_validator

from services.formats import FreeText, VolumeRef
from services.jobs.schemas import JobPublic
from services.limits.qos_bounds import BytesPerSecond, OpsPerSecond
from services.plans.retention import Policy
from services.records.plans import CopyPolicy, Plan, Retention, StoredRule, VerifyPolicy
from services.status import Consistency, PlanStatus, RestorePointKind

WallClockTime = Annotated[datetime, WithJsonSchema({
    "type": "string",
    "pattern": r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:\d{2})?$",
    "examples": ["2026-01-03T02:00:00"]})]
"""A time on a wall clock (ISO 8601 without offset; an offset given is dropped): not an
RFC 3339 date-time, which always has one, so the schema says what it is."""


class ScheduleRule(BaseModel):
    """One rule: a cron expression or an RFC 5545 RRULE, read on the wall clock of its
    timezone."""

    kind: RestorePointKind = Field(
        default=RestorePointKind.INCREMENTAL,
        description="What a slot of this rule makes; when two rules hit one slot, full wins")
    cron: FreeText | None = Field(default=None, max_length=255, examples=["0 2 * * *"],
                             description="Five-field cron: minute hour day-of-month month "
                                         "day-of-week")
    rrule: FreeText | None = Field(default=None, max_length=1000,
                              examples=["FREQ=WEEKLY;BYDAY=SU;BYHOUR=2;BYMINUTE=0"],
                              description="RFC 5545 recurrence rule (FREQ is required)")
    timezone: FreeText | None = Field(default=None, max_length=64, examples=["Europe/Berlin"],
                                  description="IANA zone; the plan's timezone when omitted")
    start: WallClockTime | None = Field(
        default=None, description="RRULE only: local wall-clock start (DTSTART); counts "
                                  "INTERVAL from here. The day the rule was saved when omitted")

    @classmethod
    def of(cls, rule: StoredRule) -> ScheduleRule:
        return cls(kind=rule.kind, cron=rule.cron, rrule=rule.rrule, timezone=rule.timezone,
                   start=rule.start)


class BackupWindow(BaseModel):
    """Local times (plan timezone) between which jobs may start; may cross midnight."""

    start: str = Field(pattern=r"^\d{2}:\d{2}$", examples=["22:00"])
    end: str = Field(pattern=r"^\d{2}:\d{2}$", examples=["06:00"])


CINDER_GROUP_ID = r"^[0-9a-fA-F]{8}-([0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}$"
"""A Cinder id (a UUID)."""


def _volumes_unique(value: list[str] | None) -> list[str] | None:
    # Cinder ids arrive lower-cased (VolumeRef): one volume in two spellings is a duplicate
    # too, refused before Cinder is asked about either.
    seen: set[str] = set()
    for volume in value or []:
        if volume in seen:
            raise ValueError(f"volume {volume} is listed more than once (a Cinder id names "
                             "the same volume in upper and lower case); list each volume once")
        seen.add(volume)
    return value


def _volumes_not_empty(value: list[str] | None) -> list[str] | None:
    if value is not None and not value:
        raise ValueError("a plan protects at least one volume; the list is empty")
    return _volumes_unique(value)


class PlanCreate(BaseModel):
    name: FreeText = Field(min_length=1, max_length=255, examples=["nightly"])
    description: FreeText | None = Field(default=None, max_length=2000)
    volumes: list[VolumeRef] = Field(default_factory=list, max_length=1000,
                               examples=[["ceph-a/volumes/demo"]],
                               description="Cinder volume ids, or (administrators, or noauth) RBD "
                                           "images `cluster/pool/image`. Leave out with "
                                           "`cinder_group`")
    cinder_group: str | None = Field(
        default=None, pattern=CINDER_GROUP_ID, examples=["1f0e4c5a-6b1d-4a53-9c9e-0d6b2f3a7e21"],
        description="A Cinder generic volume group of the project, instead of `volumes`: the "
                    "plan protects the group's volumes, and follows the group as volumes "
                    "join or leave it in Cinder. Its consistency is `group` unless given")
    rules: list[ScheduleRule] = Field(min_length=1, max_length=20)
    timezone: FreeText = Field(default="UTC", max_length=64, examples=["Europe/Berlin"])
    window: BackupWindow | None = None
    retention: Retention = Field(default_factory=Retention)
    verify: VerifyPolicy = Field(default_factory=VerifyPolicy)
    qos_bytes_per_second: BytesPerSecond | None = None
    qos_ops_per_second: OpsPerSecond | None = None
    target: FreeText | None = Field(default=None, max_length=64,
                               description="Backup target; the service's default when omitted")
    enabled: bool = True
    offsite: CopyPolicy | None = Field(
        default=None, description="Off-site copies of the plan's restore points to an object "
                                  "target, read from the backup pool (e.g. the first of each "
                                  "week, kept 12 months)")
    consistency: Consistency | None = Field(
        default=None,
        description="`volume`: each volume's backup takes its own snapshot when it starts. "
                    "`group`: each run takes one RBD group snapshot over all the plan's "
                    "volumes, so the run's restore points hold them at one instant "
                    "(crash-consistent together, for an application spread over several "
                    "volumes); the volumes must be on one Ceph cluster. Default: `group` "
                    "with `cinder_group`, else `volume`")

    # Only a list given is checked here: an empty one given is refused with its field.
    _check_volumes = field_validator("volumes")(_volumes_not_empty)

    @model_validator(mode="after")
    def _volumes_or_group(self) -> PlanCreate:
        if self.cinder_group is not None and self.volumes:
            raise ValueError("give volumes or cinder_group, not both: a plan of a Cinder group "
                             "protects the group's volumes")
        if self.cinder_group is None and not self.volumes:
            raise ValueError("a plan protects at least one volume: list volumes, or name a "
                             "Cinder group (cinder_group)")
        return self

    def chosen_consistency(self) -> Consistency:
        if self.consistency is not None:
            return self.consistency
        return Consistency.GROUP if self.cinder_group is not None else Consistency.VOLUME


class PlanUpdate(BaseModel):
    """Fields given replace the plan's; `null` clears the optional ones (window, QoS)."""

    name: FreeText | None = Field(default=None, min_length=1, max_length=255)
    description: FreeText | None = Field(default=None, max_length=2000)
    volumes: list[VolumeRef] | None = Field(default=None, max_length=1000)
    rules: list[ScheduleRule] | None = Field(default=None, min_length=1, max_length=20)
    timezone: FreeText | None = Field(default=None, max_length=64)
    window: BackupWindow | None = None
    retention: Retention | None = None
    verify: VerifyPolicy | None = None
    qos_bytes_per_second: BytesPerSecond | None = None
    qos_ops_per_second: OpsPerSecond | None = None
    target: FreeText | None = Field(default=None, max_length=64)
    consistency: Consistency | None = None
    offsite: CopyPolicy | None = Field(default=None, description="null stops the copies")
    cinder_group: str | None = Field(
        default=None, pattern=CINDER_GROUP_ID,
        description="Follow this Cinder generic volume group (the plan's volumes become its "
                    "volumes); null stops following and keeps the volumes the plan has")

    _check_volumes = field_validator("volumes")(_volumes_not_empty)

    @model_validator(mode="after")
    def _no_null_for_required(self) -> PlanUpdate:
        # A plan always has these; null cannot clear them (it made the database refuse a
        # null name with a 500; Schemathesis's walks found it).
        nulled = [name for name in ("name", "volumes", "rules", "timezone", "retention",
                                    "verify", "consistency")
                  if name in self.model_fields_set and getattr(self, name) is None]
        if nulled:
            raise ValueError(f"{', '.join(nulled)} cannot be null: a plan always has "
                             f"{'them' if len(nulled) > 1 else 'it'}; leave the field out "
                             "to keep the current value")
        if "volumes" in self.model_fields_set and self.cinder_group is not None:
            raise ValueError("give volumes or cinder_group, not both: a plan of a Cinder group "
                             "protects the group's volumes")
        return self


class RunNow(BaseModel):
    kind: RestorePointKind = RestorePointKind.INCREMENTAL


class PlanPublic(BaseModel):
    id: str
    name: str
    description: str | None
    status: PlanStatus
    volumes: list[str]
    rules: list[ScheduleRule]
    timezone: str
    window: BackupWindow | None
    retention: Retention
    verify: VerifyPolicy
    qos_bytes_per_second: int | None
    qos_ops_per_second: int | None
    target: str
    consistency: Consistency
    cinder_group: str | None = Field(description="The Cinder group whose volumes the plan "
                                                 "follows; None: the volumes as given")
    offsite: CopyPolicy | None
    next_run_at: datetime | None = Field(description="The next slot (UTC); None when paused "
                                                     "or the rules have no future slot")
    created_at: datetime
    updated_at: datetime

    @classmethod
    def of(cls, plan: Plan) -> PlanPublic:
        window = (BackupWindow(start=plan.window_start, end=plan.window_end)
                  if plan.window_start and plan.window_end else None)
        return cls(
            id=plan.id, name=plan.name, description=plan.description, status=plan.status,
            volumes=sorted(v.public_name for v in plan.volumes),
            rules=[ScheduleRule.of(r) for r in plan.rules],
            timezone=plan.timezone, window=window,
            retention=plan.retention,
            verify=verify_policy_of(plan),
            qos_bytes_per_second=plan.qos_bytes_per_second,
            qos_ops_per_second=plan.qos_ops_per_second, target=plan.target,
            consistency=plan.consistency, cinder_group=plan.cinder_group_id,
            offsite=plan.copy_policy,
            next_run_at=plan.next_slot_at if plan.status == PlanStatus.ENABLED else None,
            created_at=plan.created_at, updated_at=plan.updated_at)


def verify_policy_of(plan: Plan) -> VerifyPolicy:
    return plan.verify_policy or VerifyPolicy()


def retention_for(plan: Plan, target: str) -> Retention:
    """The retention of the plan's restore points on `target`: its copies' own, if set."""
    if plan.copy_policy is not None and target == plan.copy_policy.target \
            and plan.copy_policy.retention is not None:
        return plan.copy_policy.retention
    return plan.retention


def policy_of(retention: Retention) -> Policy:
    """The retention rule's input (services/plans/retention.py) for a plan's settings."""
    return Policy(retention.keep_last, retention.daily, retention.weekly, retention.monthly,
                  retention.yearly)


class PlanList(BaseModel):
    plans: list[PlanPublic]
    next_marker: str | None


class NextRun(BaseModel):
    at: datetime = Field(description="The slot, UTC")
    local: str = Field(description="The slot on the plan's wall clock, ISO 8601 with offset")
    timezone: str
    kind: RestorePointKind
    starts_at: datetime = Field(description="When the jobs may start: the slot, or the "
                                            "opening of the backup window when the slot is "
                                            "outside it")


class NextRuns(BaseModel):
    plan_id: str
    runs: list[NextRun]


class RetentionItem(BaseModel):
    restore_point_id: str
    volume: str
    target: str
    created_at: datetime
    local_date: str
    kind: RestorePointKind
    keep: bool
    kept_by: list[str] = Field(description="The rules keeping it: last, daily, weekly, monthly, "
                                           "yearly, newest, locked, in use; empty when pruned")


class RetentionPreview(BaseModel):
    plan_id: str
    retention: Retention
    evaluated_at: datetime
    restore_points: list[RetentionItem]


class RunNowResult(BaseModel):
    jobs: list[JobPublic]
    skipped: list[dict[str, str]] = Field(description="Volumes not backed up, with why")
