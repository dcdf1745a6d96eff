"""Keep-awake: the platform's inhibitor command, held and released, tied to the
holder's life, and said once where there is none."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest

from autopilot.runtime.keepawake import KeepAwake, inhibitor_argv


def _which(found: dict[str, str]) -> Callable[[str], str | None]:
    return found.get


def test_the_inhibitor_command_per_platform() -> None:
    linux = inhibitor_argv(
        "linux",
        42,
        "autopilot run r-1",
        _which({"systemd-inhibit": "/usr/bin/systemd-inhibit", "tail": "/usr/bin/tail"}),
    )
    assert linux == (
        "/usr/bin/systemd-inhibit",
        "--what=sleep:idle",
        "--who=autopilot",
        "--why=autopilot run r-1",
        "--mode=block",
        "/usr/bin/tail",
        "--pid=42",
        "-f",
        "/dev/null",
    )
    mac = inhibitor_argv("darwin", 42, "x", _which({"caffeinate": "/usr/bin/caffeinate"}))
    assert mac == ("/usr/bin/caffeinate", "-i", "-w", "42")
    assert inhibitor_argv("linux", 42, "x", _which({})) is None
    assert inhibitor_argv("win32", 42, "x", _which({"caffeinate": "/x"})) is None


@pytest.fixture
def fake_inhibit(tmp_path: Path) -> Path:
    """A ``systemd-inhibit`` that records its arguments and runs its command."""
    path = tmp_path / "bin" / "systemd-inhibit"
    path.parent.mkdir()
    path.write_text(
        "#!/bin/sh\n"
        'if [ "$1" = "--list" ]; then echo "no logind here" >&2; '
        'exit "${FAKE_LIST_RC:-0}"; fi\n'
        # Written whole, then renamed: a reader never sees the file half written.
        f'echo "$@" > {tmp_path}/inhibit.args.tmp && mv {tmp_path}/inhibit.args.tmp {tmp_path}/inhibit.args\n'
        "shift 4\n"
        'exec "$@"\n'
    )
    path.chmod(0o755)
    return path


def _argv(fake: Path, pid: int) -> tuple[str, ...]:
    found = {"systemd-inhibit": str(fake), "tail": "/usr/bin/tail"}
    argv = inhibitor_argv("linux", pid, "autopilot run r-1", _which(found))
    assert argv is not None
    return argv


def test_held_while_asked_and_released_after(fake_inhibit: Path, tmp_path: Path) -> None:
    notes: list[str] = []
    awake = KeepAwake("r", notes.append, argv=_argv(fake_inhibit, os.getpid()))
    assert awake.hold() is True and awake.held
    try:
        assert awake.hold() is True  # idempotent: still one inhibitor
        deadline = time.monotonic() + 30
        while not (tmp_path / "inhibit.args").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert "--why=autopilot run r-1 --mode=block" in (tmp_path / "inhibit.args").read_text()
        process = awake._process
        assert process is not None and process.poll() is None  # tail --pid holds it
    finally:
        awake.release()  # a failed check leaves no inhibitor behind for later tests
    assert not awake.held and process.poll() is not None
    assert notes == []


def test_where_there_is_none_it_is_said_once(fake_inhibit: Path) -> None:
    notes: list[str] = []
    awake = KeepAwake("r", notes.append, argv=None)
    awake.argv = None
    assert awake.hold() is False and awake.hold() is False
    assert len(notes) == 1 and "may sleep" in notes[0]


def test_a_failing_inhibitor_is_said_once_with_its_words(
    fake_inhibit: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_LIST_RC", "1")
    notes: list[str] = []
    awake = KeepAwake("r", notes.append, argv=_argv(fake_inhibit, os.getpid()))
    assert awake.hold() is False and awake.hold() is False
    assert notes == [
        "the machine may sleep during this run: systemd-inhibit failed (no logind here)"
    ]


_HOLDER = """
import os, sys, time
from autopilot.runtime.keepawake import KeepAwake
awake = KeepAwake("r", print, argv=tuple(sys.argv[1:]) + (f"--pid={os.getpid()}", "-f", "/dev/null"))
assert awake.hold()
print(awake._process.pid, flush=True)
time.sleep(600)
"""


def test_a_killed_holder_leaves_no_inhibitor_behind(fake_inhibit: Path) -> None:
    argv = _argv(fake_inhibit, 0)[:-3]  # the holder adds its own --pid
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, *argv], stdout=subprocess.PIPE, text=True
    )
    assert holder.stdout is not None
    with holder.stdout:
        inhibitor = psutil.Process(int(holder.stdout.readline()))
    assert inhibitor.is_running() and inhibitor.status() != psutil.STATUS_ZOMBIE
    holder.kill()
    holder.wait()
    inhibitor.wait(timeout=30)  # tail --pid sees the holder gone and exits
    assert not inhibitor.is_running() or inhibitor.status() == psutil.STATUS_ZOMBIE


def test_the_sleep_warning_is_logged_once_per_run_across_daemon_starts(tmp_path: Path) -> None:
    from autopilot.runtime.daemon import sleep_warning_once
    from autopilot.store.events import EventLog
    from tests.conftest import read_jsonl

    events = tmp_path / "events.jsonl"
    failing = (str(tmp_path / "no-such-inhibitor"),)
    for _ in range(3):  # the daemon's first start and two restarts
        notes = EventLog(events, "run-1", lambda: 1_800_000_000_000)
        awake = KeepAwake("autopilot run run-1", sleep_warning_once(events, notes), argv=failing)
        awake.hold()
        awake.release()
        notes.close()
    warnings = [e["note"] for e in read_jsonl(events) if e["type"] == "warning"]
    assert len(warnings) == 1
    assert warnings[0].startswith("the machine may sleep during this run:")
