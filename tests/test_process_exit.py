"""Waiting for a child's exit without polling, and the ``communicate`` git calls use."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import pytest

from autopilot.process_exit import communicate, exited_within

PIPES: dict[str, Any] = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE}


@pytest.fixture(params=["pidfd", "polling"])
def waiting(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each case with a pidfd, and where none can be opened (an old kernel, seccomp)."""
    if request.param == "polling":
        monkeypatch.delattr(os, "pidfd_open", raising=False)
    elif not hasattr(os, "pidfd_open"):
        pytest.skip("no os.pidfd_open here")
    return str(request.param)


def _child(code: str, **options: Any) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", code], **options)


def test_an_exit_is_told_as_it_happens_and_the_status_is_left_for_wait() -> None:
    if not hasattr(os, "pidfd_open"):
        pytest.skip("no os.pidfd_open here")
    child = _child("import sys; sys.stdin.read(); raise SystemExit(7)", stdin=subprocess.PIPE)
    assert exited_within(child.pid, 0.01) is False  # it waits for its stdin to close
    assert child.stdin is not None
    child.stdin.close()
    assert exited_within(child.pid, 30) is True
    assert exited_within(child.pid, 0) is True  # a zombie has exited
    assert child.wait(timeout=5) == 7  # not reaped by the wait


def test_no_such_process_cannot_be_told(monkeypatch: pytest.MonkeyPatch) -> None:
    child = _child("pass")
    child.wait()
    assert exited_within(child.pid, 0.1) is None  # reaped: its pid names nothing now
    monkeypatch.delattr(os, "pidfd_open", raising=False)
    assert exited_within(os.getpid(), 0.1) is None


def test_output_and_input_of_any_size_go_through_whole(waiting: str) -> None:
    data = os.urandom(3 * 1024 * 1024)
    copier = "import sys; b = sys.stdin.buffer.read(); sys.stdout.buffer.write(b); "
    copier += "sys.stderr.buffer.write(b[:100000]); raise SystemExit(3)"
    child = _child(copier, stdin=subprocess.PIPE, **PIPES)
    with child:
        stdout, stderr = communicate(child, data, 30)
    assert (stdout, stderr, child.returncode) == (data, data[:100000], 3)


def test_input_nobody_reads_is_dropped_without_an_error(waiting: str) -> None:
    child = subprocess.Popen(["true"], stdin=subprocess.PIPE, **PIPES)
    with child:
        assert communicate(child, b"x" * (4 * 1024 * 1024), 30) == (b"", b"")
    assert child.returncode == 0


def test_no_input_closes_stdin(waiting: str) -> None:
    child = subprocess.Popen(["cat"], stdin=subprocess.PIPE, **PIPES)
    with child:
        assert communicate(child, None, 30) == (b"", b"")
    assert child.returncode == 0


@pytest.mark.parametrize(
    "code",
    [
        "import time; time.sleep(30)",  # holds its pipes
        "import os, time; os.close(1); os.close(2); time.sleep(30)",  # closed them, runs on
    ],
)
def test_a_child_past_the_timeout_is_left_running_for_the_caller(waiting: str, code: str) -> None:
    child = _child(code, stdin=subprocess.DEVNULL, **PIPES)
    with child:
        with pytest.raises(subprocess.TimeoutExpired):
            communicate(child, None, 0.5)
        assert child.poll() is None
        child.kill()
        child.wait()
