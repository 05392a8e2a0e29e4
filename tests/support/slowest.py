"""The slowest tests of a run, from pytest's JUnit XML files (one per tier or phase):
`python -m tests.support.slowest COUNT FILE...`. Each test's time is its setup, call and
teardown together, as pytest writes it (a session fixture's start counts for the first
test that uses it)."""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from pathlib import Path

from tests.support.junit import node_id


def slowest(files: list[Path], count: int) -> list[tuple[float, str, str]]:
    found: list[tuple[float, str, str]] = []
    for file in files:
        for case in ET.parse(file).getroot().iter("testcase"):
            test = node_id(case)
            found.append((float(case.get("time") or 0), file.stem, test))
    return sorted(found, reverse=True)[:count]


def main(argv: list[str]) -> None:
    count, files = int(argv[0]), [Path(f) for f in argv[1:]]
    for took, phase, test in slowest(files, count):
        print(f"  {took:7.1f} s  {phase:<11} {test}")


if __name__ == "__main__":
    main(sys.argv[1:])
