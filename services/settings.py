"""Cairn's settings, read from `CAIRN_*` environment variables (and an optional env file).

This module is over 400 lines because it is the operator's whole configuration surface in
one place: one pydantic-settings class (`Settings`) whose fields, each with its docstring,
are every `CAIRN_*` variable (docs/configuration.md lists the same), the models of its
nested values (clusters, the three kinds of target, Keystone, Cinder), and the validators
that check them against each other (`_check_references`: one namespace of target names,
every reference to a cluster or target resolved) before any process starts."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import (
    BaseModel,
    Field,
    IPvAnyNetwork,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, SettingsConfigDict

from services.errors import StorageUnavailable


class ClusterSettings(BaseModel):
    """How to reach one Ceph cluster."""

    conf: Path
    """Path of the cluster's ceph.conf."""
    client: str = "client.admin"
    """Ceph client name Cairn connects as."""
    keyring: Path | None = None
    """Keyring for that client; None when the cluster runs with auth none or the conf names one."""


class BackupTargetSettings(BaseModel):
    """A named place backups go to: one pool on one cluster."""

    cluster: str
    """Name of a cluster in `clusters`."""
    pool: str
    """RBD pool holding the backup images."""
    max_jobs: int | None = Field(default=None, ge=1)
    """Copy jobs (backups, restores, verifies) running at once against this target; the
    service-wide `max_jobs_per_target` when None."""


class S3Credentials(BaseModel):
    access_key: str
    secret_key: SecretStr


class S3Settings(BaseModel):
    """Where an object-storage target lives. The keys come from a file (a mounted secret),
    never from the settings themselves."""

    endpoint: str
    """e.g. https://rgw.example.net or http://127.0.0.1:31800."""
    bucket: str
    region: str = "us-east-1"
    prefix: str = Field(default="cairn", pattern=r"^[A-Za-z0-9._-]+(/[A-Za-z0-9._-]+)*$")
    """Every key Cairn writes starts with `<prefix>/`: one bucket can hold several targets."""
    credentials_file: Path
    """JSON with access_key and secret_key (other fields are ignored)."""
    connections: int = Field(default=32, ge=1, le=256)
    """HTTP connections kept per worker process: the most uploads it can have in flight."""
    timeout_seconds: float = Field(default=30.0, gt=0)
    min_read_bytes_per_second: int = Field(default=64 << 10, ge=1)
    """The slowest an object may be read or written: each request ends within
    `timeout_seconds` plus what it sends and the most its answer can hold at this rate (a
    4 MiB chunk: 64 s more at the default; a listing's page of 2 MiB, 32 s), waiting for a
    free connection, looking up the endpoint's name, connecting and every retry and its
    backoff included (another attempt starts only with half that time left), or is
    abandoned and fails its job. An endpoint that trickles its answers (a byte every few
    seconds passes every per-read timeout) holds a worker's thread no longer than that
    (docs/security.md, the bucket holder's table; tests/unit/services/storage/
    test_s3_deadlines.py)."""

    def credentials(self) -> S3Credentials:
        try:
            return S3Credentials.model_validate(json.loads(self.credentials_file.read_text()))
        except (OSError, ValueError) as exc:
            raise StorageUnavailable(
                f"cannot read the S3 credentials file {self.credentials_file}: {exc}") from None


class ChunkFormatSettings(BaseModel):
    """What every target that keeps restore points as sealed, deduplicated chunks (ADR
    0007) is configured with, wherever it keeps them."""

    max_jobs: int | None = Field(default=None, ge=1)
    """Copy jobs running at once against this target; `max_jobs_per_target` when None."""
    chunk_size_mib: Literal[1, 2, 4] = 4
    """Chunk size: 4 MiB sends fewer, larger objects (the faster first full here); 1 MiB
    sends less for small incrementals (bench/README.md). Fixed once a target holds data
    would be wise: a change makes the next backup of every volume a full upload."""
    uploads_in_flight: int = Field(default=10, ge=1, le=256)
    """Chunks one job reads, seals and stores at once (an object target's: at most its
    `connections`)."""
    downloads_in_flight: int = Field(default=16, ge=1, le=256)
    """Chunks one restore or verify fetches at once (an object target's: at most its
    `connections`); they are opened on as many threads as the worker has cores and written
    `copy_window` at once. A fetch is mostly waiting: a round trip, then the chunk's
    transfer. To keep a link busy a job needs about rate x (round trip + transfer) / chunk
    size in flight: at 25 ms each way, 4 MiB chunks and 1 GiB/s, 13; on a LAN, 2 to 4. 16
    covers the first with room to spare and leaves half of the default 32 connections to a
    second job. Each fetch in flight holds one chunk in memory (`fetch_window.Limits`)."""
    full_reads: Literal["changed", "all"] = "changed"
    """What a full backup reads when the volume's previous restore point on this target
    (same chunk size, same key, `available`) still has its source snapshot: `changed`, only
    the objects changed since that snapshot, the other chunk names taken from its manifest
    (a synthetic full: its manifest is whole and names every chunk itself); `all`, every
    allocated object, as when there is no such restore point (each chunk is read and named
    again: a full then also checks what an RBD diff reported unchanged)."""


class ObjectTargetSettings(S3Settings, ChunkFormatSettings):
    """A named object-storage target: restore points kept as sealed, deduplicated chunks
    in a bucket (ADR 0007)."""

    @model_validator(mode="after")
    def _window_fits(self) -> ObjectTargetSettings:
        if self.uploads_in_flight > self.connections:
            raise ValueError(f"uploads_in_flight {self.uploads_in_flight} exceeds the "
                             f"target's connections {self.connections}")
        return self

    @model_validator(mode="after")
    def _downloads_fit(self) -> ObjectTargetSettings:
        if self.downloads_in_flight > self.connections:
            if "downloads_in_flight" not in self.model_fields_set:
                # The default, on a target configured with fewer connections before the
                # setting existed: it still starts, fetching as many as it may.
                self.downloads_in_flight = self.connections
                return self
            raise ValueError(f"downloads_in_flight {self.downloads_in_flight} exceeds the "
                             f"target's connections {self.connections}")
        return self


class DirectoryTargetSettings(ChunkFormatSettings):
    """A named directory target: restore points kept in the chunk format of the object
    targets (ADR 0007) as files under a directory, on a local file system or an NFS
    mount. Every cairn-worker and cairn-scheduler must see the same directory at this
    same path (docs/operations.md, "Directory targets")."""

    path: Path
    """The directory: absolute, existing; Cairn makes what is below it."""

    @field_validator("path")
    @classmethod
    def _plain_absolute(cls, path: Path) -> Path:
        if not path.is_absolute() or any(part in (".", "..") for part in path.parts) \
                or path == Path(path.anchor):
            raise ValueError(f"path {str(path)!r} must be an absolute path to a directory "
                             "below the root, without '.' or '..' parts")
        return path


class KeystoneSettings(BaseModel):
    """Cairn's service credentials in Keystone: they validate users' tokens and act on
    Cinder volumes for the workers."""

    auth_url: str
    """Keystone's v3 URL, e.g. http://keystone:5000/v3."""
    username: str
    password: SecretStr
    """Shown as ********** in logs, reprs and dumps; read with get_secret_value()."""
    project_name: str = "service"
    user_domain_name: str = "Default"
    project_domain_name: str = "Default"
    region_name: str | None = None
    """Region whose endpoints (Cinder's) Cairn uses; any region when None."""
    interface: Literal["public", "internal", "admin"] = "public"
    """Which of a service's catalog endpoints Cairn calls."""


class CinderSettings(BaseModel):
    """Where the Cinder backend keeps its volumes: Cinder's RBD driver names a volume's
    image `volume-<id>` in this pool."""

    cluster: str
    """Name of a cluster in `clusters` (Cinder's `rbd_ceph_conf`)."""
    pool: str = "volumes"
    """Cinder's `rbd_pool`."""
    wait_seconds: float = Field(default=300.0, gt=0)
    """How long a restore waits for a new Cinder volume to become available."""
    manage_host: str | None = None
    """Cinder's `host@backend#pool` that adopts an instant restore's clone (Cinder's
    manage-existing). When None, Cinder's only backend pool; set it when Cinder has
    several."""
    calls_per_request: int = Field(default=2000, ge=10, le=100_000)
    """Calls one API request may make to Cinder, for its caller or as Cairn's service user
    on its behalf, whatever it lists (a plan's 1000 volumes, a group restore's members,
    each a call or two); more is 422."""
    seconds_per_request: float = Field(default=60.0, gt=0, le=3600)
    """How long one API request may wait on Cinder in all: each call's timeout is what is
    left of it, and a call once it is spent is 503. The call count alone does not bound
    the time: one slow call may take keystoneauth's 30 s timeout."""


KEYSTONE_ID = re.compile(r"[0-9a-f]{32}")
"""A Keystone project id: 32 lowercase hex digits (a UUID without dashes), unique across
every domain, unlike a project's name."""


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="CAIRN_",
        env_file=None,
        # CAIRN_KEYSTONE__PASSWORD sets one field of CAIRN_KEYSTONE: secrets can come from
        # a Secret of their own while the rest of the JSON sits in a ConfigMap.
        env_nested_delimiter="__",
        use_attribute_docstrings=True,
        extra="ignore",
    )

    environment: Literal["development", "production"] = "production"
    """Deployment kind. production (what an unset environment means) refuses
    development-only choices: noauth, clock_file. development must be said explicitly."""

    database_url: str = "sqlite:///cairn.db"
    """SQLAlchemy URL of the database. SQLite is the embedded default, PostgreSQL
    (postgresql+psycopg://...) the production choice."""

    redis_url: str = "redis://127.0.0.1:6379/0"
    """Redis URL: the Celery broker and short-lived coordination."""

    clusters: dict[str, ClusterSettings] = Field(default_factory=dict)
    """Ceph clusters by name, as JSON: {"ceph-a": {"conf": "/etc/ceph/ceph.conf"}}."""

    backup_targets: dict[str, BackupTargetSettings] = Field(default_factory=dict)
    """Backup targets by name, as JSON: {"local": {"cluster": "ceph-a", "pool": "backups"}}."""

    object_targets: dict[str, ObjectTargetSettings] = Field(default_factory=dict)
    """Object-storage (S3) targets by name, as JSON: {"offsite": {"endpoint":
    "https://s3.example.net", "bucket": "backups", "credentials_file": "/secrets/s3.json"}}.
    Their names share one namespace with `backup_targets`."""

    directory_targets: dict[str, DirectoryTargetSettings] = Field(default_factory=dict)
    """Directory targets by name, as JSON: {"nfs": {"path": "/srv/cairn-backups"}}: the
    chunk format of the object targets under a directory every worker and scheduler
    mounts at that path. Their names share one namespace with the other targets'."""

    object_key_file: Path | None = None
    """The operator's key of the object and directory targets: a file (a mounted secret)
    holding 32 random bytes as 64 hex digits. It wraps each target's data key; without it
    nothing on such a target can be written or read."""

    object_gc_interval_seconds: float = Field(default=86400.0, gt=0)
    """How often each object target's unreferenced chunks are collected."""

    object_gc_max_seconds: float = Field(default=21600.0, gt=0)
    """The longest one collection of an object or directory target may take: after it no
    listing's page is asked for, no manifest read and no chunk deleted, and it stops where
    it is, nothing swept if its mark had not ended (a sweep stopped part way has deleted
    only chunks no manifest names). The worker and the target's exclusive lease are so held
    at most one request past it: the one then under way, within its own deadline (an
    object target's `timeout_seconds` and its bytes at `min_read_bytes_per_second`)."""

    object_gc_grace_seconds: float = Field(default=3600.0, ge=0)
    """A chunk no manifest names is deleted only once it is this old: the margin for a
    backup whose lease on the target lapsed (a worker stalled) without its job ending."""

    default_backup_target: str | None = None
    """Target used when a backup request names none."""

    admin_projects: list[str] = Field(default_factory=list)
    """Projects, by id, whose `admin` role makes a caller Cairn's cloud administrator: every
    project's objects, quotas, orphans, RBD images by name. The admin role in any other
    project only administers that project (as a member does). Under keystone each entry is
    a Keystone project id (names are unique only within a domain, so any domain's admin
    could make a project of the same name); under noauth, an X-Project-Id. Empty: nobody
    is the cloud administrator."""

    auth_strategy: Literal["noauth", "keystone"]
    """How requests are authenticated; no default, so a process nobody configured refuses
    to start. keystone validates X-Auth-Token with Keystone; noauth trusts X-Project-Id /
    X-Roles and needs environment development."""

    noauth_allow_remote: bool = False
    """Under noauth, cairn-api listens on a loopback address only (anyone who reaches a
    noauth API is whoever they say). True lets it listen on others: a development stack in
    a VM or container reached from its host."""

    keystone: KeystoneSettings | None = None
    """Cairn's service credentials, as JSON; required by auth_strategy keystone and by
    Cinder."""

    token_cache_seconds: float = Field(default=60.0, ge=0)
    """How long a validated token is trusted without asking Keystone again (never past its
    expiry). A revoked token is refused at the latest this long after revocation."""

    portal_dir: Path | None = Field(
        default_factory=lambda: Path(__file__).resolve().parents[1] / "portal" / "dist")
    """The web portal's built files (`make portal`), served at `/`; nothing is served there
    when the directory holds no index.html."""

    portal_session_key_file: Path | None = None
    """A file (a mounted secret) holding the keys that seal the portal's session cookie, 64
    hex digits each, one per line: the first seals, every one opens (a session sealed under
    a previous key lasts until it expires). Rotate by adding the new key as the last line,
    then moving it first once every process has it, then removing the old one once the
    longest session has passed (docs/portal.md). Every API process of one deployment needs
    the same file. Unset: a key made at start, so sessions end when the process does
    (development)."""

    portal_cookie_secure: bool = True
    """The session cookie is `__Host-cairn_session`: Secure (sent over HTTPS only; browsers
    count http://127.0.0.1 and http://localhost as secure too), for the whole host and no
    other. false, for development over plain HTTP on another address, names it
    `cairn_session` without Secure; refused in production."""

    portal_sign_in_attempts_per_minute: int = Field(default=20, ge=1)
    """Portal sign-ins one client address may try in a minute (429 after), counted in Redis
    by every API process together."""

    portal_sign_in_failures: int = Field(default=5, ge=1)
    """Failed sign-ins of one user name from one client address within
    `portal_sign_in_failure_window_seconds` before that address may not try that user
    again until the window ends (429). Six times as many failures from one address, over
    any user names, close it to every user. Keystone's own lockout
    (`[security_compliance] lockout_failure_attempts`) covers guesses spread over many
    addresses."""

    portal_sign_in_failure_window_seconds: float = Field(default=900.0, gt=0)
    """How long a failed sign-in counts against its address."""

    policy_file: Path | None = None
    """OpenStack-style policy file (YAML or JSON) overriding the default rules."""

    cinder: CinderSettings | None = None
    """The Cinder backend whose volumes Cairn protects, as JSON; enables Cinder volume ids
    (needs auth_strategy keystone)."""

    volume_pools: dict[str, list[str]] = Field(default_factory=dict)
    """Without Cinder: the pools, by cluster, whose RBD images are the volumes Cairn lists
    (GET /v1/volumes), as JSON: {"ceph-a": ["volumes"]}. Ignored when CAIRN_CINDER is set:
    Cinder then says which volumes there are."""

    ceph_connect_timeout_seconds: int = Field(default=10, ge=1)
    """How long to wait for a Ceph cluster's monitors before reporting it unreachable."""

    ceph_op_timeout_seconds: int = Field(default=30, ge=1)
    """How long one OSD or monitor operation may take (`rados_osd_op_timeout`,
    `rados_mon_op_timeout`). Without it a paused or partitioned cluster holds an API thread or
    a copy forever; with it the API answers 503 and a job fails with a reason (its retry
    resumes from the checkpoint)."""

    copy_window: int = Field(default=16, ge=1, le=256)
    """Read/write operations the copy engine keeps in flight per job."""

    progress_interval_seconds: float = Field(default=2.0, gt=0)
    """How often a running job persists its progress and heartbeat."""

    job_heartbeat_timeout_seconds: float = Field(default=60.0, gt=0)
    """A running job whose heartbeat is older than this is taken to have lost its worker
    and is queued again (or failed once its attempts are used up)."""

    job_max_attempts: int = Field(default=3, ge=1)
    """Attempts a job gets before it fails for good."""

    job_redispatch_after_seconds: float = Field(default=30.0, gt=0)
    """A job still queued this long after it was sent is sent to the broker again (the
    broker may have lost it, e.g. across a Redis restart); a duplicate delivery is harmless."""

    reconcile_interval_seconds: float = Field(default=5.0, gt=0)
    """How often cairn-scheduler looks for lost and stuck jobs."""

    cinder_group_sync_seconds: float = Field(default=300.0, gt=0)
    """How often cairn-scheduler brings the volumes of plans that follow a Cinder group in
    step with the group (a run now also syncs first)."""

    orphan_interval_seconds: float = Field(default=3600.0, gt=0)
    """How often cairn-scheduler compares Cairn's Ceph objects with its rows (the orphan
    reconciler lists every backup pool, so not often)."""

    orphan_grace_seconds: float = Field(default=3600.0, ge=0)
    """An object no row owns is removed only once it is this old: a job that is making it
    now always has its row first, and this is the margin on top."""

    orphan_scan_target_seconds: float = Field(default=60.0, gt=0)
    """The longest the orphan scan of one object or directory target may take (its listing
    of manifests and what it removes): one not over by then is stopped, reported (the
    scheduler's log, `GET /v1/orphans` `errors`) with nothing on it flagged, and the scan
    goes on to the other targets. The scan runs in cairn-scheduler's tick: whoever holds a
    target's storage could otherwise stop every scheduled backup with a listing that never
    ends (docs/security.md, the bucket holder's table)."""

    orphan_dry_run: bool = False
    """Only log what the orphan reconciler would remove and flag (GET /v1/orphans lists it
    in any case)."""

    verify_interval_seconds: float = Field(default=300.0, gt=0)
    """How often cairn-scheduler looks for restore points due for their plan's scheduled
    verification."""

    api_threads: int = Field(default=10, ge=1, le=50)
    """Requests one cairn-api process works on at once (more wait at the door). The process
    keeps as many database connections open, so no request waits for one or opens one.
    A list page is mostly the interpreter's work: more threads only queue for its lock (the
    list benchmark served 248 req/s with 10, 239 with 20)."""

    api_client_threads: int = Field(default=5, ge=1, le=50)
    """Of those, what one caller may hold at once: a busy caller leaves the rest to others.
    A caller is the validated project and user, or for a request without credentials its
    client network (an IPv4 address, an IPv6 /48); callers without credentials together
    take at most half of `api_threads`."""

    api_max_body_bytes: int = Field(default=1024 * 1024, ge=1024)
    """Larger request bodies are refused (413) before anything reads them."""

    api_body_timeout_seconds: float = Field(default=10.0, gt=0)
    """A request body must arrive whole within this (408 otherwise); until it has, the
    request holds no thread and no database connection."""

    api_send_timeout_seconds: float = Field(default=30.0, gt=0)
    """Whatever of an answer the kernel could not take at once must be taken by the client
    within this, or its connection is aborted: one that stops reading would otherwise hold
    its request's slot, its database connection and its connection for good (closing a
    connection waits for its unsent answer)."""

    api_trusted_proxies: list[IPvAnyNetwork] = Field(default_factory=list)
    """Proxies (JSON list of CIDRs) whose X-Forwarded-For names the client: a request whose
    TCP peer is in one of them is taken to come from the nearest address in that header
    that is not. Empty: every client is its TCP peer, whatever it sends. Name only proxies
    that overwrite or append to the header (an Ingress controller, a load balancer)."""

    api_token_checks: int = Field(default=4, ge=1, le=64)
    """Keystone calls one cairn-api process makes at once in each of its two lanes, on
    threads of their own (api/lanes.py): one for tokens new to the process and portal
    sign-ins, one for rechecks of tokens Keystone validated before and signed-in portal
    users' calls. A flood of unknown tokens waits for the first, never for the request
    slots or the second, and a cached token never waits at all."""

    api_token_checks_per_client: int = Field(default=2, ge=1, le=64)
    """Of a lane's calls, how many one client (network; in the lane of known users, one
    user) may have running at once; its others wait for their turn, taken in turns with
    every other client's. 32 queued per client at most (429 beyond)."""

    api_token_refusals_per_client: int = Field(default=20, ge=1)
    """Tokens Keystone may refuse from one client network within a minute; after that its
    new tokens are refused at once (429) until the minute ends, without asking Keystone.
    Tokens Keystone validated before, and portal sessions, are still checked."""

    api_token_check_timeout_seconds: float = Field(default=10.0, gt=0)
    """How long a request waits for its token's Keystone check (503 after it, with
    Retry-After); the check itself is bounded by Keystone's HTTP timeout."""

    api_max_header_bytes: int = Field(default=16 * 1024, ge=1024, le=1024 * 1024)
    """A request's line and headers together may take this much (431 otherwise, and the
    connection is closed). A Keystone token is about 200 bytes, the portal's cookie about
    1.5 KiB."""

    api_header_timeout_seconds: float = Field(default=10.0, gt=0)
    """A request's headers must arrive whole within this of the connection's opening or of
    the end of the previous answer on it (of its first byte, for a request that began
    while the previous one was being answered); 408 and a closed connection otherwise.
    Nothing a client sends resets it: a client sending one byte a second, blank lines, or
    nothing, holds a socket that long and no more."""

    api_file_requests_per_project: int = Field(default=4, ge=1, le=64)
    """File requests (listings, downloads, archives) of one project one cairn-api process
    passes to the file service at once (429 beyond). They hold no request slot while they
    stream (api/files_proxy.py): this is what keeps one project's downloads from taking
    every connection to the file service."""

    worker_database_wait_seconds: float = Field(default=60.0, ge=0)
    """How long cairn-worker waits at start for the database to answer (to check its
    webhook key against the deployment's) before it exits, for its supervisor to start it
    again."""

    worker_concurrency: int = Field(default=4, ge=1)
    """Jobs one cairn-worker process runs at once (the per-worker concurrency limit)."""

    max_jobs_per_target: int = Field(default=4, ge=1)
    """Copy jobs running at once against one backup target (unless the target sets its own
    `max_jobs`). Jobs over the limit stay queued and start as soon as a slot frees."""

    max_jobs_per_project: int = Field(default=2, ge=1)
    """Copy jobs of one project running at once, whatever the target; below
    `max_jobs_per_target`, so that one tenant's queue leaves every target room for others.
    Whatever it is set to, a project never holds all the slots of a target that has more
    than one (`services/limits/leases.py`)."""

    lease_seconds: float = Field(default=60.0, gt=0)
    """Lifetime of a concurrency slot (a lease in Redis) unless its job's worker renews it:
    a dead worker's slots free themselves within this time."""

    scheduler_tick_seconds: float = Field(default=1.0, gt=0)
    """How often cairn-scheduler looks for due slots and starts jobs that waited for a
    free slot."""

    misfire_grace_seconds: float = Field(default=3600.0, ge=0)
    """A slot missed (scheduler down) by less than this still runs, late and once; older
    missed slots are recorded as skipped."""

    schedule_min_interval_minutes: int = Field(default=60, ge=1, le=1440)
    """Plans are refused whose rules (cron or RRULE, all of a plan's together) make slots
    closer than this."""

    schedule_max_start_age_days: int = Field(default=366, ge=1, le=3660)
    """An RRULE's `start` may lie at most this far in the past."""

    @property
    def schedule_min_interval(self) -> timedelta:
        return timedelta(minutes=self.schedule_min_interval_minutes)

    @property
    def schedule_max_start_age(self) -> timedelta:
        return timedelta(days=self.schedule_max_start_age_days)

    prune_interval_seconds: float = Field(default=3600.0, gt=0)
    """How often each plan's retention is applied even when no backup ran (plans also prune
    after each of their backups)."""

    metrics_host: str = "127.0.0.1"
    """Where cairn-api, cairn-worker and cairn-scheduler serve /metrics (each on a port of
    its own, never the API's port). On Kubernetes: 0.0.0.0, with a NetworkPolicy that lets
    only Prometheus reach the metrics ports."""

    api_metrics_port: int = Field(default=0, ge=0, le=65535)
    """cairn-api's /metrics port: its request metrics and the fleet's gauges, which name
    projects, plans and volumes. 0 serves none. The REST port answers 404 for /metrics, so
    a proxy or an Ingress that serves the API can never reach them. Every uvicorn worker of
    a host shares the port in multiprocess mode (PROMETHEUS_MULTIPROC_DIR)."""

    worker_metrics_port: int = Field(default=0, ge=0, le=65535)
    """cairn-worker's /metrics port; 0 serves none. Several workers on one host share it
    in multiprocess mode (PROMETHEUS_MULTIPROC_DIR; docs/operations.md)."""

    scheduler_metrics_port: int = Field(default=0, ge=0, le=65535)
    """cairn-scheduler's /metrics port; 0 serves none."""

    target_probe_interval_seconds: float = Field(default=60.0, gt=0)
    """How often cairn-scheduler checks that each backup target's pool answers
    (`cairn_target_up`)."""

    # File-level restore (issue 34): the file service, `cairn-files` (worker/files/), which
    # reads restore points for cairn-api's file routes; and the limits of its parser.

    files_url: str = Field(default="http://127.0.0.1:8790",
                           pattern=r"^https?://[^/@\s?#]+/?$")
    """Where cairn-api reaches cairn-files (http://host:port): the API proxies every file
    request there, with `files_token`."""

    files_bind: str = Field(default="127.0.0.1:8790",
                            pattern=r"^([^\s:\[\]]+|\[[0-9A-Fa-f:.]+\]):\d{1,5}$")
    """Where cairn-files listens, host:port ([::1]:port for IPv6). Only cairn-api should
    reach it: loopback beside the API, or a NetworkPolicy that admits the API's pods only."""

    files_token: SecretStr | None = None
    """The bearer token cairn-api presents to cairn-files (at least 32 characters: `openssl
    rand -hex 32`); cairn-files refuses to start without it. The same on both sides."""

    files_sessions: int = Field(default=16, ge=1, le=1024)
    """Restore points one cairn-files process keeps open at once (each a reader with its
    cache and a sandboxed parser process); the least recently used idle one is closed for a
    new one, and when all are busy a request is refused (503, Retry-After)."""

    files_idle_seconds: float = Field(default=60.0, gt=0)
    """An open restore point nobody read for this long is closed."""

    files_cache_bytes: int = Field(default=64 << 20, ge=0)
    """Checked blocks each open restore point's reader keeps (a file system is read in
    small pieces, each costing its whole 4 MiB block). Memory: up to `files_sessions`
    times this, plus the downloads in flight."""

    files_per_project: int = Field(default=4, ge=1)
    """File requests of one project cairn-files works on at once (429 beyond): below
    `files_sessions`, so one project never holds every open restore point."""

    files_project_sessions: int | None = Field(default=None, ge=1)
    """Open restore points one project may hold at once, whatever its requests (a versions
    request's threads each hold one): beyond it, a request waits (versions) or is refused
    (429). Default: a quarter of `files_sessions` (at least 1). Another project waiting is
    never left without one of the last free ones (they are handed the last free ones first)."""

    files_download_min_bytes_per_second: int = Field(default=16 << 10, ge=0)
    """A download (a file or an archive) holds its restore point open while it lasts: one
    that has averaged less than this past its first `files_download_grace_seconds` (a
    client that stopped reading) is ended, its restore point released. 0: no minimum."""

    files_download_grace_seconds: float = Field(default=60.0, gt=0)
    """The time a download has before `files_download_min_bytes_per_second` applies."""

    files_download_max_seconds: float = Field(default=6 * 3600.0, gt=0)
    """The longest a download may last (64 GiB at 3 MiB/s), after which it is ended."""

    files_archive_walk_seconds: float = Field(default=60.0, gt=0)
    """Wall time all the walks of one archive's paths may take together, before its first
    byte (422 parser_limit_exceeded beyond)."""

    files_versions_seconds: float = Field(default=60.0, gt=0)
    """Wall time of one versions request: the restore points not read by then say so in
    their `reason`."""

    files_hash_max_bytes: int = Field(default=256 << 20, ge=0)
    """The versions of a file across restore points carry the sha256 of each version up to
    this size (hashing reads the whole file); larger ones carry none."""

    files_version_threads: int = Field(default=4, ge=1, le=64)
    """Restore points one versions request reads at once (each holds an open restore
    point meanwhile): at most `files_sessions`."""

    files_search_max_visits: int = Field(default=100_000, ge=1)
    """Directory entries one search may look at before it answers with what it found
    (`truncated`)."""

    files_archive_max_entries: int = Field(default=100_000, ge=1)
    """Entries (files, directories, links) one archive download may hold (422 beyond)."""

    files_archive_max_bytes: int = Field(default=64 << 30, ge=1)
    """Bytes of file data one archive download may hold (422 beyond)."""

    files_parser_memory_bytes: int = Field(default=512 << 20, ge=64 << 20)
    """The address space a parser process may take (RLIMIT_AS); past it the call fails
    (422 parser_limit_exceeded) and the process is replaced."""

    files_parser_cpu_seconds: int = Field(default=300, ge=1)
    """CPU time one parser process may use in its whole life (RLIMIT_CPU)."""

    files_call_seconds: float = Field(default=10.0, gt=0)
    """Wall time one parser call (list, stat, a file's extents, a read) may take."""

    files_search_seconds: float = Field(default=20.0, gt=0)
    """Wall time one search or one archive's walk may take in the parser."""

    @property
    def files_bind_address(self) -> tuple[str, int]:
        """`files_bind` as (host, port), an IPv6 host without its brackets."""
        host, _, port = self.files_bind.rpartition(":")
        return host.removeprefix("[").removesuffix("]"), int(port)

    @model_validator(mode="after")
    def _check_files(self) -> Settings:
        if self.files_token is not None and len(self.files_token.get_secret_value()) < 32:
            raise ValueError("CAIRN_FILES_TOKEN must hold at least 32 characters (`openssl "
                             "rand -hex 32`): it is all that stands between the network and "
                             "every project's files")
        if not 0 < self.files_bind_address[1] <= 65535:
            raise ValueError(f"CAIRN_FILES_BIND {self.files_bind!r}: the port must be "
                             "1-65535")
        if self.files_per_project >= self.files_sessions and self.files_sessions > 1:
            raise ValueError(
                f"CAIRN_FILES_PER_PROJECT ({self.files_per_project}) must be below "
                f"CAIRN_FILES_SESSIONS ({self.files_sessions}): one project's requests may "
                "never hold every open restore point")
        if (self.files_project_sessions is not None
                and self.files_project_sessions >= self.files_sessions
                and self.files_sessions > 1):
            raise ValueError(
                f"CAIRN_FILES_PROJECT_SESSIONS ({self.files_project_sessions}) must be below "
                f"CAIRN_FILES_SESSIONS ({self.files_sessions}): one project may never hold "
                "every open restore point")
        if self.files_version_threads > self.files_sessions:
            raise ValueError(
                f"CAIRN_FILES_VERSION_THREADS ({self.files_version_threads}) must be at most "
                f"CAIRN_FILES_SESSIONS ({self.files_sessions}): each holds an open restore "
                "point")
        return self

    webhook_allowed_networks: list[IPvAnyNetwork] = Field(default_factory=list)
    """Private, loopback or link-local networks webhooks may nevertheless point to (JSON
    list of CIDRs). Empty: webhooks reach public addresses only."""

    webhook_refused_networks: list[IPvAnyNetwork] = Field(default_factory=list)
    """Networks webhooks may never point to, public ones included (JSON list of CIDRs),
    over `webhook_allowed_networks`: the cloud's own public addresses (Keystone's, RGW's,
    Cairn's API, the load balancers'), which a worker would reach from inside the cloud."""

    webhook_timeout_seconds: float = Field(default=10.0, gt=0, le=60)
    """One delivery attempt's whole time: resolving, connecting, TLS, sending and reading
    the answer's head. A receiver that trickles its answer is cut off when it is up."""

    webhook_proxy_url: str | None = Field(default=None, pattern=r"^http://[^/@\s]+:\d+/?$")
    """An HTTP proxy every webhook delivery goes through (http://proxy.example:3128), as a
    CONNECT tunnel to the address Cairn checked. None: deliveries connect directly;
    HTTP_PROXY and the like in the environment are never used for webhooks."""

    webhook_secret_key_file: Path | None = None
    """A file (a mounted secret) holding the keys webhooks' signing secrets are sealed with
    in the database, 64 hex digits each, one per line: the first seals, every one opens.
    cairn-api and cairn-worker need the same file (and `cairn-manage db upgrade` when
    webhooks exist): the deployment's key is recorded in the database when first used, and
    a process whose file lacks it, or lacks a key some secret is sealed under, refuses to
    start; so does one without the file once webhooks were used. Without it webhooks
    cannot be created. Rotation: docs/deploy.md."""

    webhook_max_attempts: int = Field(default=8, ge=1, le=20)
    """Attempts per event before its delivery fails for good."""

    webhook_retry_base_seconds: float = Field(default=30.0, gt=0)
    """The wait before the second attempt; doubled for each further one (at most an hour):
    8 attempts span about an hour by default."""

    webhook_disable_after_failures: int = Field(default=5, ge=1)
    """Deliveries in a row that fail for good before the webhook is disabled, with the
    reason, until its owner enables it again."""

    webhook_secret_overlap_hours: float = Field(default=24.0, ge=0)
    """After a secret rotation, how long deliveries are also signed with the old secret."""

    event_delivery_log_days: float = Field(default=30.0, gt=0)
    """How long a delivery that ended stays in a webhook's delivery log."""

    webhook_senders: int = Field(default=8, ge=2, le=64)
    """Deliveries one worker process sends at once, on threads of their own: a slow or
    dead receiver never takes a thread a backup could use."""

    webhook_poll_seconds: float = Field(default=1.0, gt=0, le=60)
    """How often each worker's senders look for due deliveries in the outbox when they have
    room (and whenever one of them finishes): an event waits at most about this long for a
    free sender, whatever the worker's jobs are doing."""

    webhook_senders_per_project: int = Field(default=2, ge=1, le=63)
    """Of those, how many one project's deliveries may hold at once (below
    `webhook_senders`): a project's slow receivers never hold every sender, so other
    projects' events still go out at once."""

    notification_driver: Literal["noop", "messagingv2", "messaging", "log"] = "noop"
    """OpenStack notifications through oslo.messaging (Cinder's shape): `messagingv2` on
    the cloud's RabbitMQ, `noop` for none."""

    notification_transport_url: SecretStr | None = None
    """oslo.messaging's transport URL (rabbit://user:password@host:5672/)."""

    notification_topics: list[str] = Field(default_factory=lambda: ["notifications"])
    """Where notifications go (`<topic>.info`, `<topic>.error`)."""

    clock_file: Path | None = None
    """Development and tests only: read the current time from this file (ISO 8601), so
    tests can drive the scheduler through days, DST changes and outages."""

    @model_validator(mode="before")
    @classmethod
    def _auth_is_configured(cls, data: object) -> object:
        # Refused here, before the field's own "Field required", to say what to set.
        if isinstance(data, dict) and data.get("auth_strategy") is None:
            raise ValueError(
                "CAIRN_AUTH_STRATEGY is not set: set it to keystone (with CAIRN_KEYSTONE and "
                "CAIRN_ADMIN_PROJECTS) or, on a development machine only, to noauth with "
                "CAIRN_ENVIRONMENT=development")
        return data

    @model_validator(mode="after")
    def _check_references(self) -> Settings:
        for name, target in self.backup_targets.items():
            if target.cluster not in self.clusters:
                raise ValueError(
                    f"backup target {name!r} names cluster {target.cluster!r}, "
                    f"which is not in CAIRN_CLUSTERS ({sorted(self.clusters)})"
                )
        kinds = (("CAIRN_BACKUP_TARGETS", set(self.backup_targets)),
                 ("CAIRN_OBJECT_TARGETS", set(self.object_targets)),
                 ("CAIRN_DIRECTORY_TARGETS", set(self.directory_targets)))
        for n, (one, ones) in enumerate(kinds):
            for other, others in kinds[n + 1:]:
                if both := sorted(ones & others):
                    raise ValueError(f"targets {both} are named both in {one} and in "
                                     f"{other}; a target's name must say which one it is")
        _check_directories(self.directory_targets)
        _check_buckets(self.object_targets)
        configured = sorted([*self.backup_targets, *self.object_targets,
                             *self.directory_targets])
        if self.default_backup_target and self.default_backup_target not in configured:
            raise ValueError(
                f"CAIRN_DEFAULT_BACKUP_TARGET {self.default_backup_target!r} is not a "
                f"configured backup target ({configured})"
            )
        if self.notification_driver in ("messaging", "messagingv2") \
                and self.notification_transport_url is None:
            raise ValueError(f"CAIRN_NOTIFICATION_DRIVER {self.notification_driver} needs "
                             "CAIRN_NOTIFICATION_TRANSPORT_URL (rabbit://user:pass@host:5672/)")
        if self.auth_strategy == "keystone" and self.keystone is None:
            raise ValueError("auth_strategy keystone needs CAIRN_KEYSTONE (Cairn's service "
                             "credentials: auth_url, username, password, project_name)")
        for cluster in self.volume_pools:
            if cluster not in self.clusters:
                raise ValueError(f"CAIRN_VOLUME_POOLS names cluster {cluster!r}, which is "
                                 f"not in CAIRN_CLUSTERS ({sorted(self.clusters)})")
        if self.cinder is not None:
            if self.cinder.cluster not in self.clusters:
                raise ValueError(f"CAIRN_CINDER names cluster {self.cinder.cluster!r}, which "
                                 f"is not in CAIRN_CLUSTERS ({sorted(self.clusters)})")
            if self.keystone is None:
                raise ValueError("CAIRN_CINDER needs CAIRN_KEYSTONE: Cinder is reached through "
                                 "Keystone's catalog")
        if self.webhook_senders_per_project >= self.webhook_senders:
            raise ValueError(
                f"CAIRN_WEBHOOK_SENDERS_PER_PROJECT ({self.webhook_senders_per_project}) must "
                f"be below CAIRN_WEBHOOK_SENDERS ({self.webhook_senders}): one project's "
                "receivers may never hold every sender")
        if self.environment == "production" and self.clock_file is not None:
            raise ValueError("clock_file replaces the real time; refused in production")
        if self.environment == "production" and not self.portal_cookie_secure:
            raise ValueError("portal_cookie_secure false sends the portal's session over "
                             "plain HTTP; refused in production")
        if self.auth_strategy == "noauth" and self.environment != "development":
            raise ValueError("CAIRN_AUTH_STRATEGY=noauth trusts request headers: anyone is who "
                             "they say. It runs only with CAIRN_ENVIRONMENT=development set "
                             "explicitly; production uses keystone")
        if self.auth_strategy == "keystone":
            _check_keystone_ids(self.admin_projects)
        return self


def _check_directories(directories: dict[str, DirectoryTargetSettings]) -> None:
    """Two directory targets in one directory, or one inside the other, would each take
    the other's chunks for garbage (and the outer one would list the inner one's as its
    own): refused."""
    named = sorted(directories.items())
    for n, (one, first) in enumerate(named):
        for other, second in named[n + 1:]:
            if first.path == second.path or first.path in second.path.parents \
                    or second.path in first.path.parents:
                raise ValueError(
                    f"directory targets {one!r} ({first.path}) and {other!r} "
                    f"({second.path}) overlap: each target needs a directory of its own, "
                    "neither inside the other")


def _check_buckets(buckets: dict[str, ObjectTargetSettings]) -> None:
    """Two object targets under one prefix of one bucket, or one's prefix inside the
    other's, are refused as directory targets that overlap are: each would take the other's
    manifests and chunks for its own, or for garbage. Endpoints are compared as URLs (the
    scheme and host in any case, a default port, a trailing slash): two names of one
    store are not seen, and are the operator's to keep apart."""
    named = sorted(buckets.items())
    for n, (one, first) in enumerate(named):
        for other, second in named[n + 1:]:
            if _endpoint(first.endpoint) != _endpoint(second.endpoint) \
                    or first.bucket != second.bucket:
                continue
            inner, outer = sorted((first.prefix, second.prefix), key=len, reverse=True)
            if inner == outer or inner.startswith(outer + "/"):
                raise ValueError(
                    f"object targets {one!r} (prefix {first.prefix!r}) and {other!r} "
                    f"(prefix {second.prefix!r}) overlap in bucket {first.bucket!r} of "
                    f"{first.endpoint}: each target needs a prefix of its own, neither "
                    "inside the other")


def _endpoint(url: str) -> tuple[str, str, int | None, str]:
    parts = urlsplit(url.strip())
    scheme = parts.scheme.lower()
    try:
        port = parts.port
    except ValueError:
        port = None
    default = {"http": 80, "https": 443}.get(scheme)
    return scheme, (parts.hostname or "").rstrip("."), port or default, parts.path.rstrip("/")


def _check_keystone_ids(admin_projects: list[str]) -> None:
    for entry in admin_projects:
        if not KEYSTONE_ID.fullmatch(entry):
            raise ValueError(
                f"CAIRN_ADMIN_PROJECTS holds Keystone project ids (32 lowercase hex digits), "
                f"and {entry!r} is not one: a name would let any domain's admin make a project "
                "of that name and become Cairn's cloud administrator. Find the id with "
                f"`openstack project show {entry} -f value -c id` (with --domain D for a "
                "project outside the Default domain)")


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process's settings, read once from the environment."""
    return Settings()


def settings_for(process: str) -> Settings:
    """The settings a process starts with; without a usable configuration it ends, saying
    what to set (the settings' names, never their values: they may hold secrets). Nothing
    falls back to an open default."""
    try:
        return get_settings()
    except ValidationError as exc:
        reasons = "; ".join(_reason(error) for error in exc.errors())
        raise SystemExit(f"{process}: refusing to start: {reasons}") from None


def _reason(error: Any) -> str:
    message = str(error["msg"]).removeprefix("Value error, ")
    if not error["loc"]:
        return message
    head, *rest = (str(part) for part in error["loc"])
    return f"CAIRN_{head.upper()}{''.join(f'.{part}' for part in rest)}: {message}"


class _DatabaseOnly(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="CAIRN_", env_file=None, extra="ignore")
    database_url: str = Settings.model_fields["database_url"].default


def database_url_from_environment() -> str:
    """CAIRN_DATABASE_URL alone: `cairn-manage db` migrates with nothing else configured (the
    chart's migration job is given the database's URL and no more)."""
    return _DatabaseOnly().database_url


def operator_key(settings: Settings) -> bytes | None:
    """The operator's key of the object targets, or None when none is configured."""
    if settings.object_key_file is None:
        return None
    return read_key_file(settings.object_key_file, "the object targets' key file")


def read_key_file(path: Path, what: str) -> bytes:
    """32 bytes from a file holding them as 64 hex digits (a mounted secret)."""
    try:
        text = path.read_text().strip()
    except OSError as exc:
        raise StorageUnavailable(f"cannot read {what} {path}: {exc}") from None
    try:
        key = bytes.fromhex(text)
    except ValueError:
        key = b""
    if len(key) != 32:
        raise StorageUnavailable(f"{what} {path} must hold 64 hex digits (32 random bytes)")
    return key


MAKE_KEY = "od -An -vtx1 -N32 /dev/urandom | tr -d ' \\n'"
"""A shell line that prints a new key: 64 hex digits (32 random bytes)."""


def read_keys(path: Path, what: str) -> list[bytes]:
    """The keys of a key ring file (a mounted secret): 64 hex digits a line, the current
    key first, the keys it replaces after it (blank lines and lines starting with # are
    skipped). The first seals; every one opens, so keys are rotated without a moment in
    which something sealed cannot be opened."""
    try:
        lines = [line.strip() for line in path.read_text().splitlines()]
    except OSError as exc:
        raise StorageUnavailable(f"cannot read {what} {path}: {exc}") from None
    keys = []
    for number, line in enumerate(lines, 1):
        if not line or line.startswith("#"):
            continue
        try:
            key = bytes.fromhex(line)
        except ValueError:
            key = b""
        if len(key) != 32:
            raise StorageUnavailable(f"{what} {path}: line {number} must hold 64 hex digits "
                                     "(32 random bytes), the current key first")
        keys.append(key)
    if not keys:
        raise StorageUnavailable(f"{what} {path} holds no key: write 64 hex digits "
                                 f"({MAKE_KEY})")
    return keys
