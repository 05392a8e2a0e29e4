"""Which failed tests `make test` runs once more: those a process abort failed, not their
own assertions. `python -m tests.support.reruns REPORT WATCHDOG_ENDED` prints their node ids.

Debian 12's librbd (16.2.15) sometimes aborts the process that uses it (docs/operations.md,
"A process that died of an abort"; bench/repro/librbd_open_race.py). In the suite that is
either an xdist worker ("worker 'gw1' crashed while running ...") or a stack's cairn-worker
(the test then fails with `ABORT_MARK`, written by tests/integration/conftest.py). Such a
test says nothing about Cairn's code, so it runs again, once, alone; a second failure fails
the run. Not run again:
- a test the suite's watchdog ended (blocked past its timeout: a hang is a finding, not
  bad luck; tests/support/watchdog.py records the ids in WATCHDOG_ENDED). Only its Python
  thread can write one down: a test that blocks inside C holding the GIL is ended by
  faulthandler's last resort, looks like an abort, runs once more and fails again;
- any test when more than `MOST` failed that way: that many aborts is a new problem to
  look at, not noise to hide."""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from pathlib import Path

from tests.support.junit import node_id

ABORT_MARK = "[process abort]"
"""In a failure's message: a process the test used died of SIGABRT while it ran."""
CRASH_MARK = "crashed while running"
"""pytest-xdist's message for a test whose worker process died under it."""
MOST = 5


def rerun_ids(report: Path, watchdog_ended: Path) -> list[str]:
    ended = set(watchdog_ended.read_text().split()) if watchdog_ended.exists() else set()
    aborted: list[str] = []
    for case in ET.parse(report).getroot().iter("testcase"):
        problems = [p for p in (case.find("failure"), case.find("error")) if p is not None]
        if not problems:
            continue
        text = " ".join(f"{p.get('message', '')} {p.text or ''}" for p in problems)
        test = node_id(case)
        if test in aborted:
            continue
        if ABORT_MARK in text or (CRASH_MARK in text and test not in ended):
            aborted.append(test)
        else:
            return []  # a test failed on its own: running others again changes nothing
    return aborted if len(aborted) <= MOST else []


def main(argv: list[str]) -> None:
    for test in rerun_ids(Path(argv[0]), Path(argv[1])):
        print(test)


if __name__ == "__main__":
    main(sys.argv[1:])
