from __future__ import annotations

from pathlib import Path

from tests.support.reruns import ABORT_MARK, MOST, rerun_ids


def _report(tmp_path: Path, *cases: tuple[str, str | None]) -> Path:
    body = "".join(
        f'<testcase classname="tests.integration.api.test_jobs" name="{name}" time="1">'
        + (f'<failure message="{message}">trace</failure>' if message else "")
        + "</testcase>"
        for name, message in cases
    )
    report = tmp_path / "integration.xml"
    report.write_text(f"<testsuites><testsuite>{body}</testsuite></testsuites>")
    return report


def test_a_test_whose_process_aborted_runs_again(tmp_path: Path) -> None:
    report = _report(
        tmp_path,
        ("test_ok", None),
        ("test_a", "worker 'gw1' crashed while running 'tests/...::test_a'"),
        ("test_b", f"{ABORT_MARK} cairn-worker died of SIGABRT during this test"),
    )

    assert rerun_ids(report, tmp_path / "ended") == [
        "tests/integration/api/test_jobs.py::test_a",
        "tests/integration/api/test_jobs.py::test_b",
    ]


def test_a_test_the_watchdog_ended_for_hanging_does_not(tmp_path: Path) -> None:
    report = _report(tmp_path, ("test_a", "worker 'gw1' crashed while running 'x'"))
    ended = tmp_path / "ended"
    ended.write_text("tests/integration/api/test_jobs.py::test_a\n")

    assert rerun_ids(report, ended) == []


def test_nothing_runs_again_when_a_test_failed_on_its_own(tmp_path: Path) -> None:
    report = _report(
        tmp_path,
        ("test_a", f"{ABORT_MARK} cairn-worker died"),
        ("test_b", "AssertionError: 202 != 404"),
    )

    assert rerun_ids(report, tmp_path / "ended") == []


def test_nothing_runs_again_when_aborts_are_too_many_to_be_noise(tmp_path: Path) -> None:
    report = _report(tmp_path, *((f"test_{i}", f"{ABORT_MARK} died") for i in range(MOST + 1)))

    assert rerun_ids(report, tmp_path / "ended") == []
