"""loop.identity: a process's identity read from /proc, the same as psutil's."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

from autopilot.loop.identity import (
    is_same_process,
    process_identity,
    process_start_time,
    start_time_now,
)
from autopilot.runtime.liveness import process_alive


def test_start_time_and_command_are_what_psutil_reports() -> None:
    for pid in (1, os.getpid(), os.getppid()):
        identity = process_identity(pid)
        assert identity is not None
        process = psutil.Process(pid)
        assert identity.start_time == pytest.approx(process.create_time(), abs=0.01)
        assert identity.command == (" ".join(process.cmdline())[:500] or None)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the boot clock is Linux's")
def test_the_start_time_of_a_child_just_started_is_read_off_the_boot_clock() -> None:
    # What the driver records for an agent it just spawned names that agent: never
    # before the kernel's record, and well within is_same_process's tolerance after.
    for _ in range(20):
        child = subprocess.Popen(["sleep", "60"])
        try:
            recorded = start_time_now()
            kernel = process_start_time(child.pid)
            assert recorded is not None and kernel is not None
            assert kernel - 1e-6 <= recorded <= kernel + 0.5
            assert is_same_process(child.pid, recorded, None) is True
        finally:
            child.kill()
            child.wait()


def test_a_command_with_spaces_and_odd_bytes_reads_as_psutil_joins_it() -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)", "two words", "caf\u00e9", ""]
    )
    try:
        deadline = time.monotonic() + 10
        while "two words" not in psutil.Process(child.pid).cmdline():  # until it runs python
            assert time.monotonic() < deadline
            time.sleep(0.01)
        identity = process_identity(child.pid)
        assert identity is not None
        expected = " ".join(psutil.Process(child.pid).cmdline())
        assert identity.command == expected
        assert is_same_process(child.pid, identity.start_time, identity.command) is True
        assert is_same_process(child.pid, identity.start_time, "something else") is False
    finally:
        child.kill()
        child.wait()


def test_a_process_that_is_gone_has_no_identity() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    assert process_identity(child.pid) is None
    assert process_start_time(child.pid) is None
    assert is_same_process(child.pid, None, None) is False
    assert process_alive(child.pid, None) is False


def test_a_zombie_is_not_the_recorded_process() -> None:
    child = subprocess.Popen(["sleep", "60"])
    try:
        identity = process_identity(child.pid)
        assert identity is not None
        assert is_same_process(child.pid, identity.start_time, identity.command) is True
        os.kill(child.pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while psutil.Process(child.pid).status() != psutil.STATUS_ZOMBIE:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert is_same_process(child.pid, identity.start_time, None) is False  # not reaped
    finally:
        child.kill()
        child.wait()


def test_a_reused_pid_is_not_the_recorded_process() -> None:
    mine = process_start_time(os.getpid())
    assert mine is not None
    assert process_alive(os.getpid(), mine) is True
    assert process_alive(os.getpid(), mine - 3600) is False
    assert process_alive(os.getpid(), None) is True
    assert process_alive(None, mine) is None
