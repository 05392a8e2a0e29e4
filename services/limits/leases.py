"""Concurrency slots as leases in Redis: one sorted set per scope (a backup target, a
project, a project's share of a target), members are job ids scored by their expiry. Taking
the slots of a job is one Lua script over all its scopes, all or nothing, timed by Redis's
own clock (no skew between hosts). A worker renews its job's leases with every heartbeat; a
dead worker stops renewing and its slots free themselves when the lease runs out. Redis
holds nothing that cannot be rebuilt: after a Redis restart the leases are gone, running
jobs take them back on their next renewal and waiting ones are admitted again."""

from __future__ import annotations

from dataclasses import dataclass

from redis import Redis

from services import targets
from services.settings import Settings
from services.status import COPY_JOB_KINDS, JobKind

_PREFIX = "cairn:slots:"

# KEYS: scopes. ARGV: job id, lease ms, then one limit per scope.
# Returns 0 when the job holds a slot in every scope, else the 1-based index of a full one.
_ACQUIRE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local job, ttl = ARGV[1], tonumber(ARGV[2])
for i, key in ipairs(KEYS) do
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
  if not redis.call('ZSCORE', key, job) then
    if redis.call('ZCARD', key) >= tonumber(ARGV[2 + i]) then return i end
  end
end
for _, key in ipairs(KEYS) do
  redis.call('ZADD', key, now + ttl, job)
  redis.call('PEXPIRE', key, ttl * 2)
end
return 0
"""


@dataclass(frozen=True)
class Scope:
    key: str
    limit: int
    label: str


def scopes_for(settings: Settings, kind: JobKind, project_id: str,
               target: str | None, *, contended: bool = True) -> list[Scope]:
    """The limits a job counts against: jobs that move data against their target, their
    project, and their project's share of the target (`contended`: whether another project
    has a job waiting for that target); prunes and deletes (short, metadata-only) against
    none."""
    if kind not in COPY_JOB_KINDS:
        return []
    scopes = []
    if target is not None:
        slots = targets.job_limit(settings, target)
        scopes.append(Scope(f"{_PREFIX}target:{target}", slots, f"target {target!r}"))
        scopes.append(Scope(f"{_PREFIX}share:{target}:{project_id}",
                            project_share(settings, slots, contended=contended),
                            f"project {project_id!r} on target {target!r}"))
    scopes.append(Scope(f"{_PREFIX}project:{project_id}", settings.max_jobs_per_project,
                        f"project {project_id!r}"))
    return scopes


def project_share(settings: Settings, target_slots: int, *, contended: bool = True) -> int:
    """The slots of one target that one project may take: `max_jobs_per_project`, and while
    another project has a job waiting for the target (`contended`), never its last free
    one. Whatever the limits are set to (a target's own `max_jobs` below the project limit
    included), one tenant's queue leaves a slot of a shared target to a tenant who asks for
    one, and fair share hands it on; with nobody else waiting the slot is not kept idle. A
    slot taken is kept until its job ends (nothing is preempted): a project that came late
    waits for the first of the others' jobs to end, never behind their whole queue."""
    if contended:
        return max(1, min(settings.max_jobs_per_project, target_slots - 1))
    return min(settings.max_jobs_per_project, target_slots)


class Leases:
    def __init__(self, redis: Redis, lease_seconds: float) -> None:
        self.redis = redis
        self.ttl_ms = max(1, int(lease_seconds * 1000))
        self._acquire = redis.register_script(_ACQUIRE)

    @classmethod
    def from_settings(cls, settings: Settings) -> Leases:
        client = Redis.from_url(settings.redis_url, socket_timeout=5, socket_connect_timeout=2)
        return cls(client, settings.lease_seconds)

    def acquire(self, job_id: str, scopes: list[Scope]) -> Scope | None:
        """Take (or renew) the job's slot in every scope; returns the full scope when one
        has no room, having taken nothing."""
        if not scopes:
            return None
        full = int(self._acquire(keys=[s.key for s in scopes],
                                 args=[job_id, self.ttl_ms, *[s.limit for s in scopes]]))
        return scopes[full - 1] if full else None

    def acquire_many(self, requests: list[tuple[str, list[Scope]]]) -> list[Scope | None]:
        """`acquire` for many jobs in one round trip (each job's take is still atomic, in
        the order given); the result per job as `acquire` returns it."""
        pipe = self.redis.pipeline(transaction=False)
        asked = [(job_id, scopes) for job_id, scopes in requests if scopes]
        for job_id, scopes in asked:
            self._acquire(keys=[s.key for s in scopes],
                          args=[job_id, self.ttl_ms, *[s.limit for s in scopes]], client=pipe)
        answers = iter(pipe.execute() if asked else [])
        out: list[Scope | None] = []
        for _, scopes in requests:
            full = int(next(answers)) if scopes else 0
            out.append(scopes[full - 1] if full else None)
        return out

    def release(self, job_id: str, scopes: list[Scope]) -> None:
        if scopes:
            pipe = self.redis.pipeline(transaction=False)
            for scope in scopes:
                pipe.zrem(scope.key, job_id)
            pipe.execute()

    def holders(self, scope: Scope) -> list[str]:
        """Jobs holding a live slot in the scope (for the API and tests)."""
        t = self.redis.time()
        now_ms = t[0] * 1000 + t[1] // 1000
        members: list[bytes] = self.redis.zrangebyscore(scope.key, now_ms, "+inf")  # type: ignore[assignment]
        return [m.decode() for m in members]

    def close(self) -> None:
        self.redis.close()
