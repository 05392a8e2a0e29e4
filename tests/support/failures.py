"""The tests that failed in a run, from pytest's JUnit XML files, each with the first line
of its reason: `python -m tests.support.failures FILE...`. The run's summary prints them
last, because CI shows only the tail of a run's output and a tier's name alone does not
say which test broke."""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from pathlib import Path

# How much of a reason one line keeps: enough to recognise it, short enough for a tail.
REASON_CHARS = 200


def failures(files: list[Path]) -> list[tuple[str, str, str]]:
    """(phase, test, reason) of every failed or erroring test case, in file order."""
    found: list[tuple[str, str, str]] = []
    for file in files:
        try:
            root = ET.parse(file).getroot()
        except (ET.ParseError, OSError) as error:
            # A tier killed mid-write leaves a broken file; say so rather than hide it.
            found.append((file.stem, "(no report)", f"{file.name}: {error}"))
            continue
        for case in root.iter("testcase"):
            for outcome in ("failure", "error"):
                problem = case.find(outcome)
                if problem is None:
                    continue
                test = f"{case.get('classname', '').replace('.', '/')}.py::{case.get('name')}"
                found.append((file.stem, test, _first_line(problem)))
    return found


def _first_line(problem: ET.Element) -> str:
    text = problem.get("message") or problem.text or problem.tag
    line = next((part.strip() for part in text.splitlines() if part.strip()), problem.tag)
    return line[:REASON_CHARS]


def main(argv: list[str]) -> None:
    for phase, test, reason in failures([Path(f) for f in argv]):
        print(f"  {phase:<11} {test}\n              {reason}")


if __name__ == "__main__":
    main(sys.argv[1:])
