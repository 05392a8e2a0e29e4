"""Admission: which queued jobs start now. A job starts when the start rule
(`services/jobs/start_rule.py`) lets it: it is due (`not_before`), a scheduled job is inside
its plan's backup window, and it holds a concurrency slot in each of its scopes (its backup
target, its project); it is then marked sent and handed to the broker. A due job outside
its window is told to wait for the window's next opening and is not sent (the worker's
claim would only hand it back). Jobs over a limit stay queued and are looked at again on
the next round, as soon as the API submits something, or as soon as a worker ends a job
and frees its slots (`hand_on`): a freed slot does not wait for the scheduler's tick.

Fair share: candidates are taken round-robin across projects, counting the jobs each
project already has started: a project's n-th waiting job ranks n + (its started jobs), and
ties go to the oldest; within a project, restores come before its backups and verifies. So
a project with 500 queued volumes does not starve one with 5: when a slot frees, the
project with the fewest jobs under way gets it. A project's share of a target keeps a slot
for others only while another project has a job waiting for it (`leases.project_share`)."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import and_, case, func, or_, select, update

from services.base import utcnow
from services.db import Database
from services.dispatch import Dispatcher
from services.errors import InvalidSchedule
from services.jobs import start_rule
from services.limits.leases import Leases, Scope, scopes_for
from services.plans import timing
from services.records.jobs import Job
from services.records.plans import Plan
from services.settings import Settings
from services.status import COPY_JOB_KINDS, JobKind, JobStatus

log = logging.getLogger(__name__)

BATCH = 2000
LEASE_BATCH = 500
"""Candidates looked at per round; the round-robin order makes every project appear early."""
HAND_ON_BATCH = 50
"""Candidates a worker looks at when a job ends: a job frees at most a few slots."""


@dataclass
class AdmitResult:
    sent: list[str] = field(default_factory=list)
    waiting: int = 0
    """Due jobs that found no free slot."""
    deferred: int = 0
    """Due jobs outside their plan's backup window, told to wait for its next opening."""


@dataclass(frozen=True)
class _Candidate:
    id: str
    kind: JobKind
    project_id: str
    target: str | None
    facts: start_rule.StartFacts


class Admission:
    def __init__(self, db: Database, leases: Leases, dispatcher: Dispatcher,
                 settings: Settings) -> None:
        self.db = db
        self.leases = leases
        self.dispatcher = dispatcher
        self.settings = settings

    def admit(self, now: datetime, job_ids: list[str] | None = None, *,
              limit: int = BATCH) -> AdmitResult:
        """Start what is due at `now` (the schedule clock) and has free slots, looking at
        the first `limit` candidates in fair-share order."""
        result = AdmitResult()
        candidates = self._candidates(now, job_ids, limit)
        if not candidates:
            return result
        windows = self._windows({c.facts.plan_id for c in candidates
                                 if c.facts.keeps_to_window and c.facts.plan_id})
        candidates = self._inside_windows(now, candidates, windows, result)
        if not candidates:
            return result
        waiting = self._waiting(now)
        full: set[str] = set()
        chosen: list[tuple[str, JobKind, list[Scope]]] = []
        # Leases are taken a pipeline at a time (one round trip per LEASE_BATCH jobs);
        # a scope found full skips the later candidates of it without asking Redis.
        for start in range(0, len(candidates), LEASE_BATCH):
            asking: list[tuple[_Candidate, list[Scope]]] = []
            for job in candidates[start:start + LEASE_BATCH]:
                # A project may take a target's last free slot while no other project
                # has a job waiting for that target (work-conserving share).
                others = waiting.get(job.target or "", set()) - {job.project_id}
                scopes = scopes_for(self.settings, job.kind, job.project_id, job.target,
                                    contended=bool(others))
                if any(s.key in full for s in scopes):
                    result.waiting += 1
                    continue
                asking.append((job, scopes))
            answers = self.leases.acquire_many([(j.id, scopes) for j, scopes in asking])
            for (job, scopes), blocked in zip(asking, answers, strict=True):
                wait = start_rule.must_wait(job.facts, windows.get(job.facts.plan_id or ""),
                                            now, full=blocked)
                if wait is not None:
                    if wait.full is not None:
                        full.add(wait.full.key)
                    result.waiting += 1
                    continue
                chosen.append((job.id, job.kind, scopes))
        if not chosen:
            return result
        with self.db.session() as session:
            # Only one admitter marks a job sent (several schedulers, or the API and one).
            won = set(session.scalars(
                update(Job)
                .where(Job.id.in_([j for j, _, _ in chosen]), Job.status == JobStatus.QUEUED,
                       Job.sent_at.is_(None))
                .values(sent_at=utcnow())
                .returning(Job.id)
            ))
        mine = [(job_id, kind) for job_id, kind, _ in chosen if job_id in won]
        result.sent = self.dispatcher.send_many(mine)
        # Another admitter sent the ones not won; their leases are that job's, kept.
        for job_id, _, scopes in chosen:
            if job_id in won and job_id not in result.sent:
                self._unsend(job_id)
                self.leases.release(job_id, scopes)
        return result

    def hand_on(self, now: datetime) -> AdmitResult:
        """A worker's call once a job ended and freed its slots: start the next jobs that
        fit now. Only the head of the fair-share order is looked at (the scheduler's round
        looks at the rest), so a job's end costs one small query however long the queue."""
        return self.admit(now, limit=HAND_ON_BATCH)

    def admit_ids(self, job_ids: list[str]) -> None:
        """The API's after-commit hand-over (`services/jobs/submit.py`): start what it just
        submitted, if slots allow."""
        self.admit(utcnow(), job_ids)

    def _windows(self, plan_ids: set[str]) -> dict[str, start_rule.Window | None]:
        """The backup windows of these plans (a plan gone has none)."""
        if not plan_ids:
            return {}
        windows: dict[str, start_rule.Window | None] = {}
        with self.db.session() as session:
            for plan_id, start, end, zone in session.execute(
                    select(Plan.id, Plan.window_start, Plan.window_end, Plan.timezone)
                    .where(Plan.id.in_(sorted(plan_ids)))):
                try:
                    windows[plan_id] = timing.window(start, end, zone)
                except InvalidSchedule:
                    # A window that no longer reads (its zone left the tz database): the
                    # jobs go to the worker's claim, which fails them with the reason
                    # rather than hold up every other project's admission here.
                    log.warning("plan %s: its backup window cannot be read", plan_id,
                                exc_info=True)
                    windows[plan_id] = None
        return windows

    def _inside_windows(self, now: datetime, candidates: list[_Candidate],
                        windows: dict[str, start_rule.Window | None],
                        result: AdmitResult) -> list[_Candidate]:
        """The candidates the start rule lets start now but for their slots. The others
        (due, but outside their plan's window) are told when the window opens next, and
        leave the candidates until then instead of being sent for the claim to hand back."""
        ready: list[_Candidate] = []
        later: dict[datetime | None, list[str]] = {}
        for job in candidates:
            wait = start_rule.must_wait(job.facts, windows.get(job.facts.plan_id or ""), now)
            if wait is None:
                ready.append(job)
            else:
                later.setdefault(wait.until, []).append(job.id)
        if later:
            with self.db.session() as session:
                for until, job_ids in later.items():
                    # Guarded as the send is: a job another admitter sent meanwhile is
                    # its claim's to judge.
                    session.execute(update(Job).where(
                        Job.id.in_(job_ids), Job.status == JobStatus.QUEUED,
                        Job.sent_at.is_(None)).values(not_before=until))
            result.deferred += sum(len(job_ids) for job_ids in later.values())
        return ready

    def _waiting(self, now: datetime) -> dict[str, set[str]]:
        """Target -> the projects with a due job waiting for one of its slots."""
        waiting: dict[str, set[str]] = {}
        with self.db.session() as session:
            for target, project_id in session.execute(
                    select(Job.target, Job.project_id).distinct().where(
                        Job.status == JobStatus.QUEUED, Job.sent_at.is_(None),
                        Job.target.is_not(None), Job.kind.in_(COPY_JOB_KINDS),
                        start_rule.due(now))):
                waiting.setdefault(str(target), set()).add(project_id)
        return waiting

    def _candidates(self, now: datetime, job_ids: list[str] | None,
                    limit: int) -> list[_Candidate]:
        # Inside a project restores go first: a tenant who lost data does not wait behind
        # its own nightly run of backups (and verifies).
        urgent = case((Job.kind == JobKind.RESTORE, 0), else_=1)
        turn = func.row_number().over(partition_by=Job.project_id,
                                      order_by=(urgent, Job.queued_at, Job.id)).label("turn")
        inner = select(Job.id, Job.kind, Job.project_id, Job.target, Job.queued_at,
                       Job.not_before, Job.plan_id, Job.slot_at, Job.attempt, turn).where(
            Job.status == JobStatus.QUEUED, Job.sent_at.is_(None),
            start_rule.due(now))
        if job_ids is not None:
            inner = inner.where(Job.id.in_(job_ids))
        ranked = inner.subquery()
        started = (select(Job.project_id, func.count().label("n")).where(
            or_(Job.status == JobStatus.RUNNING,
                and_(Job.status == JobStatus.QUEUED, Job.sent_at.is_not(None))))
            .group_by(Job.project_id).subquery())
        rank = ranked.c.turn + func.coalesce(started.c.n, 0)
        stmt = (select(ranked.c.id, ranked.c.kind, ranked.c.project_id, ranked.c.target,
                       ranked.c.not_before, ranked.c.plan_id, ranked.c.slot_at,
                       ranked.c.attempt)
                .join(started, started.c.project_id == ranked.c.project_id, isouter=True)
                .order_by(rank, ranked.c.queued_at, ranked.c.id).limit(limit))
        with self.db.session() as session:
            return [_Candidate(r.id, JobKind(r.kind), r.project_id, r.target,
                               start_rule.StartFacts(not_before=r.not_before,
                                                     plan_id=r.plan_id, slot_at=r.slot_at,
                                                     attempt=r.attempt))
                    for r in session.execute(stmt)]

    def _unsend(self, job_id: str) -> None:
        with self.db.session() as session:
            session.execute(update(Job).where(Job.id == job_id, Job.status == JobStatus.QUEUED)
                            .values(sent_at=None))
