"""store.flock: exclusive fcntl locks that the OS releases when their holder dies."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from autopilot.store.flock import FileLock


def test_two_holders_in_one_process_exclude_each_other(tmp_path: Path) -> None:
    first = FileLock(tmp_path / "x.lock")
    second = FileLock(tmp_path / "x.lock")
    assert first.acquire() and first.held
    assert second.acquire() is False and not second.held
    first.release()
    assert not first.held
    assert second.acquire() is True
    second.release()


def test_a_waiting_acquire_gets_the_lock_once_released(tmp_path: Path) -> None:
    holder = FileLock(tmp_path / "x.lock")
    assert holder.acquire()
    waiter = FileLock(tmp_path / "x.lock", timeout_seconds=30)
    taken: list[bool] = []
    thread = threading.Thread(target=lambda: taken.append(waiter.acquire()))
    thread.start()
    thread.join(0.3)
    assert thread.is_alive() and not taken  # still waiting
    holder.release()
    thread.join(30)
    assert taken == [True] and waiter.held
    waiter.release()


def test_a_lock_is_released_when_its_holder_is_killed(tmp_path: Path) -> None:
    path = tmp_path / "x.lock"
    code = (
        "import sys, time\n"
        "from autopilot.store.flock import FileLock\n"
        f"lock = FileLock({str(path)!r})\n"
        "assert lock.acquire()\n"
        "print('held', flush=True)\n"
        "time.sleep(60)\n"
    )
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "held"
        assert FileLock(path).acquire() is False
        os.kill(child.pid, signal.SIGKILL)
        child.wait(30)
        assert FileLock(path).acquire() is True
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        if child.stdout is not None:
            child.stdout.close()


def test_the_lock_file_is_private_and_kept(tmp_path: Path) -> None:
    path = tmp_path / "x.lock"
    path.write_text("")
    path.chmod(0o666)
    lock = FileLock(path)
    assert lock.acquire()
    lock.release()
    assert path.exists()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_a_second_acquire_by_the_holder_is_an_error(tmp_path: Path) -> None:
    lock = FileLock(tmp_path / "x.lock")
    assert lock.acquire()
    with pytest.raises(RuntimeError):
        lock.acquire()
    lock.release()
    lock.release()  # releasing what is not held does nothing
    assert not lock.held


def test_a_lock_file_that_is_a_symlink_is_refused(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    target.write_text("keep me")
    (tmp_path / "x.lock").symlink_to(target)
    with pytest.raises(OSError):
        FileLock(tmp_path / "x.lock").acquire()
    assert target.read_text() == "keep me"
