"""Leases on an object target (ADR 0007): each backup holds a shared one from its first
chunk lookup to its manifest, a garbage collection's sweep an exclusive one. So a sweep
never runs while a backup may name a chunk the sweep's mark found unreferenced.

Every acquisition first bumps the target's gate row, in the same transaction as its check
of the other leases and its insert: two acquisitions of one target are serialized by the
database, so a sweep and a backup cannot both find the other absent. A lease lapses unless
renewed (`held` renews it from a thread of its own); a lapsed lease counts for nothing, and
its holder learns it at its next `check`."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta

from sqlalchemy import delete, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from services.base import utcnow
from services.db import Database
from services.errors import LeaseBusy, LeaseLost
from services.records.target_leases import TargetLease, TargetLeaseGate

log = logging.getLogger(__name__)


def try_acquire(db: Database, target: str, holder: str, *, exclusive: bool,
                ttl_seconds: float) -> str | None:
    """The new lease's id, or None while a lease that excludes it is held: any live lease
    for an exclusive one, a live exclusive one for a shared one."""
    with db.session() as session:
        _pass_gate(session, target)
        now = utcnow()
        session.execute(delete(TargetLease).where(TargetLease.target == target,
                                                  TargetLease.expires_at <= now))
        blocking = select(TargetLease.id).where(TargetLease.target == target)
        if not exclusive:
            blocking = blocking.where(TargetLease.exclusive.is_(True))
        if session.scalar(blocking.limit(1)) is not None:
            return None
        if exclusive:  # counted only when taken: a sweep may run from now on
            session.execute(update(TargetLeaseGate).where(TargetLeaseGate.target == target)
                            .values(sweeps=TargetLeaseGate.sweeps + 1))
        lease = TargetLease(target=target, holder=holder, exclusive=exclusive,
                            acquired_at=now, expires_at=now + timedelta(seconds=ttl_seconds))
        session.add(lease)
        session.flush()
        return lease.id


def renew(db: Database, lease_id: str, ttl_seconds: float) -> bool:
    """Extend a live lease; False when it lapsed (and may have been taken over)."""
    with db.session() as session:
        now = utcnow()
        result = session.execute(
            update(TargetLease).where(TargetLease.id == lease_id, TargetLease.expires_at > now)
            .values(expires_at=now + timedelta(seconds=ttl_seconds)))
        return bool(getattr(result, "rowcount", 0) == 1)


def release(db: Database, lease_id: str) -> None:
    with db.session() as session:
        session.execute(delete(TargetLease).where(TargetLease.id == lease_id))


def sweeps(db: Database, target: str) -> int:
    """How many exclusive leases (sweeps) the target has had. Read under a shared lease, it
    cannot change until that lease is released or lapses: a backup that finds it equal to
    the count an earlier attempt read under its own lease knows no sweep ran in between."""
    with db.session() as session:
        return session.scalar(select(TargetLeaseGate.sweeps)
                              .where(TargetLeaseGate.target == target)) or 0


def _pass_gate(session: Session, target: str) -> None:
    try:
        with session.begin_nested():
            session.add(TargetLeaseGate(target=target, generation=0, sweeps=0))
    except IntegrityError:
        pass
    session.execute(update(TargetLeaseGate).where(TargetLeaseGate.target == target)
                    .values(generation=TargetLeaseGate.generation + 1))


class Lease:
    """A held lease, renewed every third of its lifetime until released."""

    def __init__(self, db: Database, lease_id: str, target: str, ttl_seconds: float) -> None:
        self.db, self.id, self.target, self.ttl = db, lease_id, target, ttl_seconds
        self._lost = threading.Event()
        self._renewed = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._renew, name=f"lease-{target}",
                                        daemon=True)
        self._thread.start()

    def _renew(self) -> None:
        while not self._stop.wait(self.ttl / 3):
            try:
                if not renew(self.db, self.id, self.ttl):
                    self._lost.set()
                    return
                self._renewed = time.monotonic()
            except Exception:
                # The database may be briefly away: the lease holds until it expires.
                log.warning("could not renew lease %s on %s", self.id, self.target,
                            exc_info=True)

    def check(self) -> None:
        """Raises LeaseLost when the lease lapsed (another holder may have acted since);
        renews it otherwise."""
        if self._lost.is_set() or not renew(self.db, self.id, self.ttl):
            self._lost.set()
            raise LeaseLost(f"the lease on object target {self.target!r} lapsed (the worker "
                            "stalled longer than its lifetime); what it guarded may have "
                            "changed meanwhile, so the work starts over")
        self._renewed = time.monotonic()

    def ensure(self) -> None:
        """`check`, but without a database round trip while the last renewal is less than
        a third of the lifetime old (called before each of many small steps)."""
        if self._lost.is_set() or time.monotonic() - self._renewed > self.ttl / 3:
            self.check()

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        release(self.db, self.id)


@contextmanager
def held(db: Database, target: str, holder: str, *, exclusive: bool, ttl_seconds: float,
         wait_seconds: float, interrupt: Callable[[], None] | None = None,
         poll_seconds: float = 0.5) -> Iterator[Lease]:
    """Hold a lease on `target` for the block, waiting up to `wait_seconds` for the leases
    that exclude it to go (`interrupt` is called while waiting: a cancel stops the wait);
    LeaseBusy when they do not."""
    deadline = time.monotonic() + wait_seconds
    while (lease_id := try_acquire(db, target, holder, exclusive=exclusive,
                                   ttl_seconds=ttl_seconds)) is None:
        if time.monotonic() > deadline:
            what = ("backups to it are running" if exclusive
                    else "a garbage collection is sweeping it")
            raise LeaseBusy(f"object target {target!r} stayed busy for {wait_seconds:.0f} s: "
                            f"{what}; try again later")
        if interrupt is not None:
            interrupt()
        time.sleep(poll_seconds)
    lease = Lease(db, lease_id, target, ttl_seconds)
    try:
        yield lease
    finally:
        lease.close()
