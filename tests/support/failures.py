"""The tests that failed in a run, from pytest's JUnit XML files, each with the first line
of its reason: `python -m tests.support.failures FILE...`. The run's summary prints them
last, because CI shows only the tail of a run's output and a tier's name alone does not
say which test broke."""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from pathlib import Path

from tests.support.junit import node_id

# How much of a reason one line keeps: enough to recognise it, short enough for a tail.
REASON_CHARS = 200


AGAIN = "-again"
"""The report of a tier's tests run once more after a process abort (deploy/local/test.sh)."""


def failures(files: list[Path]) -> list[tuple[str, str, str]]:
    """(phase, test, reason) of every failed or erroring test case, in file order; one that
    passed when its tier ran it again says so first."""
    reports = {file.stem: _parse(file) for file in files}
    found: list[tuple[str, str, str]] = []
    for phase, cases in reports.items():
        if isinstance(cases, str):
            # A tier killed mid-write leaves a broken file; say so rather than hide it.
            found.append((phase, "(no report)", cases))
            continue
        again = reports.get(phase + AGAIN)
        passed_again = (
            {test for test, problem in again if problem is None}
            if isinstance(again, list)
            else set()
        )
        for test, problem in cases:
            if problem is None:
                continue
            reason = _first_line(problem)
            if test in passed_again:
                reason = f"passed when run again; first: {reason}"
            found.append((phase, test, reason[:REASON_CHARS]))
    return found


def _parse(file: Path) -> list[tuple[str, ET.Element | None]] | str:
    """(test, its failure or error or None) of each case, or why the file cannot be read."""
    try:
        root = ET.parse(file).getroot()
    except (ET.ParseError, OSError) as error:
        return f"{file.name}: {error}"
    cases: list[tuple[str, ET.Element | None]] = []
    for case in root.iter("testcase"):
        test = node_id(case)
        problem = case.find("failure")
        cases.append((test, problem if problem is not None else case.find("error")))
    return cases


def _first_line(problem: ET.Element) -> str:
    text = problem.get("message") or problem.text or problem.tag
    line = next((part.strip() for part in text.splitlines() if part.strip()), problem.tag)
    return line[:REASON_CHARS]


def main(argv: list[str]) -> None:
    for phase, test, reason in failures([Path(f) for f in argv]):
        print(f"  {phase:<11} {test}\n              {reason}")


if __name__ == "__main__":
    main(sys.argv[1:])
