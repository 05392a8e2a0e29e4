"""A worker's senders are shared fairly and their queue is bounded: one project's slow
receivers hold at most its share of the senders, another project's delivery starts at
once, and an id that finds no room is refused (its row stays pending) instead of growing
the queue."""

from __future__ import annotations

import threading
import time

from worker.senders import Senders


class Work:
    """Deliveries whose id starts with `slow` block until released."""

    def __init__(self) -> None:
        self.started: list[str] = []
        self.release = threading.Event()
        self.lock = threading.Lock()

    def __call__(self, delivery_id: str) -> None:
        with self.lock:
            self.started.append(delivery_id)
        if delivery_id.startswith("slow"):
            self.release.wait(10)

    def wait_started(self, delivery_id: str, timeout: float = 5) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                if delivery_id in self.started:
                    return True
            time.sleep(0.01)
        return False


def test_one_projects_slow_receivers_leave_senders_to_the_others() -> None:
    work = Work()
    senders = Senders(work, threads=4, per_key=2)
    try:
        for number in range(10):
            assert senders.submit(f"slow-{number}", "hostile")
        assert work.wait_started("slow-1")
        assert senders.submit("healthy-1", "other")
        assert senders.submit("healthy-2", "another")
        assert work.wait_started("healthy-1")
        assert work.wait_started("healthy-2")
        assert senders.running() == {"hostile": 2}
        assert sorted(work.started) == ["healthy-1", "healthy-2", "slow-0", "slow-1"]
    finally:
        work.release.set()
    assert work.wait_started("slow-9")


def test_the_queue_is_bounded_per_key_and_in_all() -> None:
    work = Work()
    senders = Senders(work, threads=2, per_key=1, waiting_per_key=3, waiting=5)
    try:
        assert senders.submit("slow-a", "p1")
        assert work.wait_started("slow-a")
        assert all(senders.submit(f"slow-{n}", "p1") for n in range(3))
        assert not senders.submit("slow-refused", "p1")  # p1's share of the queue is full
        assert senders.submit("slow-b", "p2")
        assert work.wait_started("slow-b")
        assert senders.submit("slow-c", "p2")
        assert senders.submit("slow-d", "p3")
        assert not senders.submit("x", "p4")  # 5 waiting in all
    finally:
        work.release.set()
    assert work.wait_started("slow-d")
    assert "slow-refused" not in work.started


def test_the_outbox_reader_is_told_the_room_left_and_woken_when_a_sender_frees() -> None:
    """What the reader takes from the outbox: no more than the senders could start now,
    and none of a key that holds its share; a sender that finishes wakes it at once."""
    work = Work()
    woken = threading.Event()
    senders = Senders(work, threads=4, per_key=2, on_free=woken.set)
    try:
        for number in range(3):
            assert senders.submit(f"slow-{number}", "hostile")
        assert work.wait_started("slow-1")
        assert senders.room() == (1, {"hostile": 3})
        assert not woken.is_set()
    finally:
        work.release.set()
    assert woken.wait(5)
    assert work.wait_started("slow-2")
