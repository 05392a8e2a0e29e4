from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.failures import failures, main

REPORT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest">
<testcase classname="tests.tools.deploy.test_image" name="test_builds" time="3.0"/>
<testcase classname="tests.tools.deploy.test_image" name="test_runs" time="9.0">
<failure message="AssertionError: the image's user is root&#10;assert 0 == 1000">trace</failure>
</testcase>
<testcase classname="tests.integration.api.test_x" name="test_y[postgresql]" time="1.0">
<error message="failed on setup with &quot;TimeoutError&quot;">trace</error>
</testcase>
</testsuite></testsuites>
"""


def test_each_failed_or_erroring_test_is_named_with_the_first_line_of_its_reason(
    tmp_path: Path,
) -> None:
    (tmp_path / "tools.xml").write_text(REPORT)

    assert failures([tmp_path / "tools.xml"]) == [
        (
            "tools",
            "tests/tools/deploy/test_image.py::test_runs",
            "AssertionError: the image's user is root",
        ),
        (
            "tools",
            "tests/integration/api/test_x.py::test_y[postgresql]",
            'failed on setup with "TimeoutError"',
        ),
    ]


def test_a_report_cut_short_by_a_killed_tier_is_named_not_skipped(tmp_path: Path) -> None:
    (tmp_path / "integration.xml").write_text("<testsuites><testsuite>")

    found = failures([tmp_path / "integration.xml"])

    assert [(phase, test) for phase, test, _ in found] == [("integration", "(no report)")]


def test_a_passing_run_prints_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    passing = REPORT
    for outcome in ("failure", "error"):
        passing = passing.replace(f"<{outcome}", "<skipped").replace(f"</{outcome}>", "</skipped>")
    (tmp_path / "unit.xml").write_text(passing)

    main([str(tmp_path / "unit.xml")])

    assert capsys.readouterr().out == ""


def test_a_test_that_passed_when_its_tier_ran_it_again_says_so(tmp_path: Path) -> None:
    (tmp_path / "integration.xml").write_text(REPORT)
    (tmp_path / "integration-again.xml").write_text(
        '<testsuites><testsuite><testcase classname="tests.tools.deploy.test_image"'
        ' name="test_runs" time="1.0"/></testsuite></testsuites>'
    )

    found = {
        (phase, test): reason
        for phase, test, reason in failures(
            [tmp_path / "integration.xml", tmp_path / "integration-again.xml"]
        )
    }

    assert found[("integration", "tests/tools/deploy/test_image.py::test_runs")] == (
        "passed when run again; first: AssertionError: the image's user is root"
    )
    assert not found[
        ("integration", "tests/integration/api/test_x.py::test_y[postgresql]")
    ].startswith("passed")
