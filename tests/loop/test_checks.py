"""autopilot's own run of the criteria's check commands, with real processes."""

from __future__ import annotations

import hashlib
import os
import stat
import time
from pathlib import Path

import pytest

from autopilot.core.workitems import Criterion
from autopilot.loop.checks import run_checks, user_shell


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers kill(0); it is gone for our purposes.
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().split(") ")[-1].split()[0] != "Z"
    except OSError:
        return False


def test_passing_checks_give_a_digest_of_what_ran_and_what_it_printed(tmp_path: Path) -> None:
    criteria = (
        Criterion("ac1", "hello printed", "echo hello"),
        Criterion("ac2", "no check"),
        Criterion("ac3", "true", "true"),
    )
    run = run_checks(criteria, cwd=tmp_path, folder=tmp_path, env={"PATH": os.environ["PATH"]})
    assert [(r.criterion_id, r.exit_code) for r in run.results] == [("ac1", 0), ("ac3", 0)]
    assert run.outcome.passed
    expected = hashlib.sha256(b"ac1\0echo hello\0hello\n\x000\0ac3\0true\0\x000\0").hexdigest()
    assert run.outcome.digest == f"sha256:{expected}"
    assert run.outcome.evidence == (
        "[completion-check] ac1: exit 0",
        "[completion-check] ac3: exit 0",
    )
    assert (tmp_path / "check-ac1.log").read_bytes() == b"hello\n"
    assert run.outcome.failure is None


def test_check_logs_are_private_whatever_the_umask(tmp_path: Path) -> None:
    # What a check printed may hold secrets: 0600, like the run's other files.
    before = os.umask(0o022)
    try:
        run_checks((Criterion("ac1", "x", "echo hi"),), cwd=tmp_path, folder=tmp_path)
        run_checks((Criterion("ac2", "x", "true"),), cwd=tmp_path / "gone", folder=tmp_path)
    finally:
        os.umask(before)
    for name in ("check-ac1.log", "check-ac2.log"):
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == 0o600


def test_a_failing_check_fails_the_outcome_with_its_output_tail(tmp_path: Path) -> None:
    criteria = (
        Criterion("unit", "tests", "echo first; echo 'AssertionError: 2 != 3' >&2; exit 3"),
        Criterion("ok", "fine", "true"),
    )
    run = run_checks(criteria, cwd=tmp_path, folder=tmp_path)
    assert not run.outcome.passed
    assert run.results[0].exit_code == 3
    assert run.outcome.failure == (
        "check unit ($ echo first; echo 'AssertionError: 2 != 3' >&2; exit 3) exit 3; "
        "its output ended with:\nfirst\nAssertionError: 2 != 3\n"
    )
    assert run.outcome.evidence[0] == "[completion-check] unit: exit 3"


def test_the_digest_changes_with_the_output(tmp_path: Path) -> None:
    (tmp_path / "v").write_text("1")
    criteria = (Criterion("ac1", "x", "cat v"),)
    first = run_checks(criteria, cwd=tmp_path, folder=tmp_path).outcome.digest
    assert run_checks(criteria, cwd=tmp_path, folder=tmp_path).outcome.digest == first
    (tmp_path / "v").write_text("2")
    assert run_checks(criteria, cwd=tmp_path, folder=tmp_path).outcome.digest != first


def test_checks_run_in_the_work_tree(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    run = run_checks((Criterion("ac1", "x", "pwd"),), cwd=work, folder=tmp_path)
    assert run.results[0].output_tail.strip() == str(work)


def test_a_hanging_check_times_out_and_its_whole_group_is_ended(tmp_path: Path) -> None:
    check = "sleep 300 & echo $! > child.pid; sleep 300"
    run = run_checks(
        (Criterion("hang", "x", check),), cwd=tmp_path, folder=tmp_path, timeout_seconds=1
    )
    result = run.results[0]
    assert result.timed_out
    assert result.exit_code is None
    assert not run.outcome.passed
    assert "timed out after" in (run.outcome.failure or "")
    child = int((tmp_path / "child.pid").read_text())
    deadline = time.monotonic() + 5
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child)


def test_a_stop_ends_a_hanging_check_and_runs_no_more(tmp_path: Path) -> None:
    # stop --now while a check hangs: it is ended (its whole group), no later check
    # runs, and the run says it stopped rather than that the check failed.
    hang = Criterion("hang", "x", "sleep 300 & echo $! > child.pid; sleep 300")
    later = Criterion("later", "y", "touch later.ran")

    def should_stop() -> bool:
        return (tmp_path / "child.pid").exists()

    run = run_checks((hang, later), cwd=tmp_path, folder=tmp_path, stop=should_stop)
    assert run.stopped and [r.criterion_id for r in run.results] == ["hang"]
    assert run.results[0].status_text() == "stopped" and run.results[0].exit_code is None
    assert not run.results[0].timed_out and not (tmp_path / "later.ran").exists()
    child = int((tmp_path / "child.pid").read_text())
    deadline = time.monotonic() + 5
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child)


def test_a_child_left_behind_does_not_hold_the_run_and_is_ended(tmp_path: Path) -> None:
    check = "sleep 300 & echo $! > child.pid; echo done"
    run = run_checks(
        (Criterion("bg", "x", check),), cwd=tmp_path, folder=tmp_path, timeout_seconds=60
    )
    assert run.results[0].exit_code == 0
    assert run.results[0].duration_ms < 30_000
    child = int((tmp_path / "child.pid").read_text())
    deadline = time.monotonic() + 5
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child)


def test_no_checks_pass_without_a_digest(tmp_path: Path) -> None:
    run = run_checks((Criterion("ac1", "x"),), cwd=tmp_path, folder=tmp_path)
    assert run.results == ()
    assert run.outcome.passed
    assert run.outcome.digest is None


def test_a_check_that_cannot_start_fails(tmp_path: Path) -> None:
    run = run_checks((Criterion("ac1", "x", "true"),), cwd=tmp_path / "gone", folder=tmp_path)
    assert not run.outcome.passed
    assert run.results[0].error is not None
    assert "could not start" in (run.outcome.failure or "")


@pytest.mark.parametrize(
    ("shell", "expected"),
    [("/bin/bash", "/bin/bash"), ("bash", "/bin/sh"), ("", "/bin/sh"), ("/nope/sh", "/bin/sh")],
)
def test_user_shell(shell: str, expected: str) -> None:
    if expected != "/bin/sh" and not os.access(expected, os.X_OK):
        pytest.skip("no bash here")
    assert user_shell({"SHELL": shell}) == expected


@pytest.mark.parametrize(
    ("after", "timed_out"), [("sleep 300", True), ("echo done", False)], ids=["hangs", "exits"]
)
def test_a_setsid_child_of_a_check_is_ended_with_it(
    tmp_path: Path, after: str, timed_out: bool
) -> None:
    """A child that left the check's session and process group (``setsid``) is ended
    too, before ``run_checks`` returns, whether the check timed out or exited."""
    spawn = "setsid sh -c 'echo $$ > child.pid; exec sleep 300' > /dev/null 2>&1 < /dev/null &"
    check = f"{spawn} while [ ! -s child.pid ]; do sleep 0.05; done; {after}"
    run = run_checks(
        (Criterion("ac1", "x", check),), cwd=tmp_path, folder=tmp_path, timeout_seconds=2
    )
    assert run.results[0].timed_out is timed_out
    child = int((tmp_path / "child.pid").read_text())
    assert not _alive(child)
