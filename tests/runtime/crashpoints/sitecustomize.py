"""Fault injection for the reliability tests: a ``kill -9`` of the daemon at a named
point, once. Put this folder on ``PYTHONPATH`` with ``CRASH_AT=<point>`` and
``CRASH_MARKER=<file>``; only a process running ``autopilot.runtime.daemon`` is killed,
and only while the marker file does not exist (it is written just before the kill, so
the restarted daemon goes on).

Points: ``spawn`` (the agent started, its pid not yet in state.json), ``mid_stream``
(the agent's first tool call was logged), ``after_iteration_end`` (the iteration's
``iteration_end`` was logged, before the next state write), ``state_write`` (the temp
file of the write that concludes an iteration is on disk, not yet renamed into place),
``limit_wait`` (``rate_limited`` was logged), ``paused`` (``pause`` was logged); in a
backlog run also ``agent_exited`` (the agent ended and its checkpoint was logged, its
work item not yet concluded), ``checks`` (the agent's reports claimed, the criteria's
checks about to run) and ``item_concluded`` (``workitem_end`` logged, the step not).

At ``limit_wait`` the restarted daemon's clock jumps past the reset time once it has
logged the resumed wait: the limit can be hours away, so the restart surely finds the
wait still on, and the test still ends in seconds whatever the machine's load.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Any

_POINT = os.environ.get("CRASH_AT", "")
_MARKER = os.environ.get("CRASH_MARKER", "")


def _in_daemon() -> bool:
    return bool(sys.argv) and sys.argv[0].replace("\\", "/").endswith("runtime/daemon.py")


def _crash(point: str) -> None:
    if point != _POINT or not _MARKER or os.path.exists(_MARKER) or not _in_daemon():
        return
    with open(_MARKER, "w") as marker:
        marker.write(point)
    os.kill(os.getpid(), signal.SIGKILL)


def _end_the_resumed_wait(until: Any) -> None:
    """After the restart (the marker exists), move the daemon's clock past ``until``."""
    if _POINT != "limit_wait" or not os.path.exists(_MARKER) or not _in_daemon():
        return
    if not isinstance(until, int):
        return
    from autopilot.loop import clock

    real_now_ms = clock.SystemClock.now_ms
    offset_ms = max(0, until - real_now_ms(clock.SystemClock()) + 1)

    def now_ms(self: Any) -> int:
        return real_now_ms(self) + offset_ms

    clock.SystemClock.now_ms = now_ms  # type: ignore[method-assign]


def _install() -> None:
    from autopilot.store import events, state

    emit = events.EventLog.emit

    def emit_then_maybe_crash(self: Any, event_type: Any, **fields: Any) -> Any:
        written = emit(self, event_type, **fields)
        kind = str(event_type)
        if kind == "substage":
            _crash("mid_stream")
        elif kind == "checkpoint" and fields.get("iteration"):
            _crash("agent_exited")
        elif kind == "workitem_end":
            _crash("item_concluded")
        elif kind == "iteration_end":
            _crash("after_iteration_end")
        elif kind == "rate_limited":
            _crash("limit_wait")
            _end_the_resumed_wait(fields.get("waitingUntil"))
        elif kind == "pause":
            _crash("paused")
        return written

    events.EventLog.emit = emit_then_maybe_crash  # type: ignore[method-assign]

    emit_all = events.EventLog.emit_all

    def emit_all_then_maybe_crash(self: Any, batch: Any) -> Any:
        written = emit_all(self, batch)
        if any(str(event_type) == "iteration_end" for event_type, _ in batch):
            _crash("after_iteration_end")
        return written

    events.EventLog.emit_all = emit_all_then_maybe_crash  # type: ignore[method-assign]

    write = state.write_atomically

    def write_then_maybe_crash(path: Any, data: bytes, **options: Any) -> None:
        if b'"agentPid": ' in data and b'"agentPid": null' not in data:
            _crash("spawn")
        if (
            _POINT == "state_write"
            and b'"iterationOpen": false' in data
            and b'"iterations": 1' in data
        ):
            tmp = path.with_name(f"{path.name}.tmp.{os.getpid()}.crash")
            with open(tmp, "wb") as handle:
                handle.write(data)
            _crash("state_write")
        write(path, data, **options)

    state.write_atomically = write_then_maybe_crash

    from autopilot.loop import checks

    run_checks = checks.run_checks

    def crash_then_run_checks(*args: Any, **kwargs: Any) -> Any:
        _crash("checks")
        return run_checks(*args, **kwargs)

    # Before loop.backlog imports it by name.
    checks.run_checks = crash_then_run_checks  # type: ignore[assignment]


if _POINT:
    _install()
