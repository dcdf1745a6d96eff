"""Waiting for a child's exit without polling, and the ``communicate`` and
``spawn_and_communicate`` git calls use."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from autopilot import process_exit
from autopilot.process_exit import communicate, exited_within, spawn_and_communicate

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


def _spawn(
    code: str, input_bytes: bytes | None = None, timeout: float = 30
) -> tuple[int, bytes, bytes]:
    argv = [sys.executable, "-c", code]
    return spawn_and_communicate(sys.executable, argv, dict(os.environ), input_bytes, timeout)


def test_a_spawned_child_gets_its_input_and_gives_its_output_and_status(waiting: str) -> None:
    data = os.urandom(3 * 1024 * 1024)
    copier = "import sys; b = sys.stdin.buffer.read(); sys.stdout.buffer.write(b); "
    copier += "sys.stderr.buffer.write(b[:100000]); raise SystemExit(3)"
    assert _spawn(copier, data) == (3, data, data[:100000])


def test_a_spawned_child_without_input_reads_nothing_and_sees_its_own_argv() -> None:
    code = "import sys; print(repr(sys.stdin.read()), sys.argv[1:])"
    status, out, _ = spawn_and_communicate(
        sys.executable, ["child", "-c", code, "x"], dict(os.environ), None, 30
    )
    assert (status, out) == (0, b"'' ['x']\n")


@pytest.mark.parametrize("proc", ["listed", "unlisted"])
def test_a_spawned_child_has_a_session_the_std_descriptors_only_and_default_sigpipe(
    proc: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if proc == "unlisted":  # no /proc/self/fd: ``Popen`` starts it
        monkeypatch.setattr(process_exit, "_inheritable_descriptors", lambda: None)
    inherited_read, inherited_write = os.pipe()
    os.set_inheritable(inherited_write, True)  # as a parent could have handed it over
    try:
        code = "import os; print(os.getsid(0) == os.getpid(), sorted(os.listdir('/proc/self/fd')))"
        status, out, _ = _spawn(code)
        assert status == 0
        assert out.decode().split(" ", 1)[0] == "True"
        assert out.decode().split(" ", 1)[1].strip() == "['0', '1', '2', '3']"  # 3: the listing
    finally:
        os.close(inherited_read)
        os.close(inherited_write)
    # SIGPIPE at its default, as ``subprocess`` leaves it: ``yes`` ends quietly.
    status, out, err = spawn_and_communicate(
        "/bin/sh", ["sh", "-c", "yes | head -n 1"], dict(os.environ), None, 30
    )
    assert (status, out, err) == (0, b"y\n", b"")


def test_a_spawned_child_killed_by_a_signal_has_a_negative_status() -> None:
    assert _spawn("import os, signal; os.kill(os.getpid(), signal.SIGKILL)")[0] == -9


def test_a_program_that_is_not_there_cannot_be_spawned(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        spawn_and_communicate(str(tmp_path / "nothing"), ["nothing"], {}, None, 30)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("proc", ["listed", "unlisted"])
def test_a_spawned_child_past_the_timeout_is_ended_with_all_it_started(
    waiting: str, proc: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if proc == "unlisted":
        monkeypatch.setattr(process_exit, "_inheritable_descriptors", lambda: None)
    pid_file = tmp_path / "grandchild"
    code = (
        "import subprocess, sys, time; "
        "g = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
        f"open({str(pid_file)!r}, 'w').write(str(g.pid)); time.sleep(60)"
    )
    started = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired):
        _spawn(code, timeout=1.5)
    assert time.monotonic() - started < 30
    grandchild = int(pid_file.read_text())
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and _alive(grandchild):
        time.sleep(0.05)
    assert not _alive(grandchild)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False
