"""One liveness check: ``status``, ``list`` (``manage.activity``), the view and the
supervisor read a run's driver the same way, from ``runtime.liveness``."""

from __future__ import annotations

import ast
import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path

import pytest

import autopilot
from autopilot import control
from autopilot.loop.identity import process_identity
from autopilot.manage.activity import Activity, run_activity
from autopilot.runtime.liveness import driver_running
from autopilot.store.run_state import RunState
from autopilot.store.rundir import RunDir
from autopilot.store.state import StateStore, read_state
from tests.fakes import NO_SUCH_PID, arm

PACKAGE = Path(autopilot.__file__).parent
ONE_CHECK = {"driver_running", "driver_alive", "supervisor_alive", "driver_lock_held"}


def test_the_liveness_check_is_defined_once() -> None:
    defined: dict[str, list[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef) and node.name in ONE_CHECK | {"process_alive"}:
                defined.setdefault(node.name, []).append(str(path.relative_to(PACKAGE)))
    assert defined == {name: ["runtime/liveness.py"] for name in ONE_CHECK | {"process_alive"}}


@contextmanager
def _lock_held(folder: Path) -> Iterator[None]:
    fd = os.open(RunDir(folder).driver_lock, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _record(folder: Path, pid: int | None, start_time: float | None) -> RunState:
    def change(s: RunState) -> None:
        s.pid, s.pid_start_time, s.pid_command, s.host = pid, start_time, None, None

    return StateStore(RunDir(folder).state).update(change)


def _me() -> float:
    identity = process_identity(os.getpid())
    assert identity is not None and identity.start_time is not None
    return identity.start_time


@pytest.mark.parametrize(
    ("situation", "expected"),
    [
        ("a live driver recorded", True),
        ("the recorded pid reused by another process", False),
        ("a dead driver recorded", False),
        ("no driver recorded, the lock held", True),
        ("a dead driver recorded, the lock held", True),
        ("no driver recorded, no lock", None),
    ],
)
def test_status_list_and_the_view_agree_on_the_driver(
    tmp_path: Path, situation: str, expected: bool | None
) -> None:
    folder = arm(tmp_path).folder
    if situation == "a live driver recorded":
        _record(folder, os.getpid(), _me())
    elif situation == "the recorded pid reused by another process":
        _record(folder, os.getpid(), _me() - 3600)
    elif "dead driver" in situation:
        _record(folder, NO_SUCH_PID, 1.0)
    else:
        _record(folder, None, None)
    held = "lock held" in situation
    with _lock_held(folder) if held else nullcontext():
        state = read_state(RunDir(folder).state)
        view = driver_running(folder, state)
        status = control.status(folder).alive
        listed = run_activity(folder, state)
    activity = {True: Activity.ACTIVE, False: Activity.GONE, None: Activity.UNKNOWN}[expected]
    assert (view, status, listed) == (expected, expected, activity)


@pytest.mark.parametrize(
    ("pid", "start_time"),
    [(2**31, None), (10**30, None), (os.getpid(), 10**400), (os.getpid(), -(10**400))],
    ids=["pid 2**31", "pid 10**30", "start 10**400", "start -10**400"],
)
def test_a_pid_or_start_time_no_process_can_have_is_a_gone_process(
    pid: int, start_time: float
) -> None:
    """A hand-edited record (``state.json``, ``finished.json``'s drivers) never crashes
    the check: no process has such a pid, nor started at such a time."""
    from autopilot.runtime.liveness import process_alive

    assert process_alive(pid, start_time) is False
