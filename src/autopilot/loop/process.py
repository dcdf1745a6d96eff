"""Run one agent process: argv in, bytes out, bounded memory, every limit enforced.

The agent gets its own session and process group (so a terminal's Ctrl-C reaches
the driver, not the agent) and, where the machine allows, the run's cgroup. It dies
with the driver: in the cgroup, by the run's sentinel (``loop.sentinel``); else by a
parent-death signal (set by ``setpriv`` where it can be, ``loop.spawn``). Output is
read as bytes with ``os.read`` from both pipes: the raw stream goes to the iteration's
files, stdout is split into lines with no line-length limit other
than ``max_line_bytes`` (a longer line is skipped whole, never the lines after it),
and bad UTF-8 is replaced. When it ends —
by exiting, a limit, or a stop — every process it started is ended too, wherever it
went (``loop.descendants``). This guards against what agent loops met in real use
(GitHub issues): children a Ctrl-C leaves running (agrimsingh/ralph-wiggum-cursor#13), a
CLI that never exits after its result or a grandchild holding stdout open
(anthropics/claude-code#61416), a child hung on an inherited stdin or stopped in the
T state (alexknowshtml/smaug#10), a half-written last line
(frankbria/ralph-claude-code#198) and a result lost to a 64 KiB line limit
(dcellison/kai#623).
"""

from __future__ import annotations

import contextlib
import os
import selectors
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from msgspec import Struct

from autopilot.core.vocabulary import EndedBy
from autopilot.loop.agent_group import AgentGroup, is_stopped
from autopilot.loop.cgroup import AgentCgroup
from autopilot.loop.descendants import reap_adopted
from autopilot.loop.spawn import start_agent
from autopilot.loop.subreaper import become_subreaper
from autopilot.process_exit import exited_within
from autopilot.store.lines import LineSplitter
from autopilot.store.private import create_private

_READ_BYTES = 256 * 1024
_STDERR_TAIL_BYTES = 8192
_POLL_SECONDS = 0.25
_REAP_SECONDS = 1.0
HEARTBEAT_SECONDS = _REAP_SECONDS
"""While the agent runs, the driver touches its raw stdout file this often (with the
reaping), so crash recovery knows the driver lived until about that file's mtime."""


class ProcessLimits(Struct, frozen=True):
    """Limits on one agent process.

    Attributes:
        timeout_seconds: Wall-clock limit (None: none).
        idle_timeout_seconds: Limit on time without any output (None: none).
        result_grace_seconds: After the final result event, or after the agent
            exited while something still holds its pipes, how long to wait before
            ending the whole process group.
        kill_grace_seconds: Between SIGTERM and SIGKILL to the group.
        max_line_bytes: A stdout line longer than this is skipped (counted).
        max_raw_bytes: Each stream's raw copy on disk stops at this size (the
            output is still read and parsed), so an agent cannot fill the disk.
    """

    timeout_seconds: float | None = None
    idle_timeout_seconds: float | None = None
    result_grace_seconds: float = 5.0
    kill_grace_seconds: float = 3.0
    max_line_bytes: int = 16 * 1024 * 1024
    max_raw_bytes: int = 4 * 1024 * 1024 * 1024


class ProcessResult(Struct, frozen=True):
    """How the agent process ended.

    Attributes:
        ended_by: See ``EndedBy``.
        exit_code: The exit status; ``-N`` for death by signal N; None if it never
            started.
        launch_error: Why it could not start (``LAUNCH_FAILED`` only).
        stderr_tail: The last 8 KiB of stderr, decoded.
        stdout_bytes: Bytes read from stdout.
        oversized_lines: stdout lines skipped for exceeding ``max_line_bytes``.
        duration_seconds: Wall time from start to end.
        was_stopped: The agent was seen in the stopped (T) state.
        ended_by_driver: The agent had not exited by itself when its group was
            ended (after its final result, a timeout, or a stop).
        raw_truncated: The raw copy hit ``max_raw_bytes`` and was cut short.
        write_error: Why the raw copy stopped early (e.g. the disk is full).
    """

    ended_by: EndedBy
    exit_code: int | None
    launch_error: str | None
    stderr_tail: str
    stdout_bytes: int
    oversized_lines: int
    duration_seconds: float
    was_stopped: bool = False
    ended_by_driver: bool = False
    raw_truncated: bool = False
    write_error: str | None = None


def run_agent_process(
    argv: list[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    stdin_data: bytes | None,
    stdout_path: Path,
    stderr_path: Path,
    on_line: Callable[[str], None],
    result_seen: Callable[[], bool],
    should_kill: Callable[[], bool],
    limits: ProcessLimits,
    on_start: Callable[[int], None] | None = None,
    cgroup: AgentCgroup | None = None,
    keep_cgroup: bool = False,
    keep_watch: Callable[[], bool] | None = None,
) -> ProcessResult:
    """Run ``argv`` to its end under ``limits``; never raises for the agent's sake.

    Args:
        argv: Program and arguments (never a shell string).
        cwd: Working directory.
        env: The complete environment.
        stdin_data: Written to stdin, which is then closed; None gives ``/dev/null``.
        stdout_path: Raw stdout is copied here.
        stderr_path: Raw stderr is copied here.
        on_line: Called with each complete stdout line (decoded, no newline).
        result_seen: True once the parser has the agent's final result event.
        should_kill: Polled; True ends the process group now (``stop --now``).
        limits: See ``ProcessLimits``.
        on_start: Called with the child's pid once it runs.
        cgroup: The run's cgroup, for the agent and all it starts (see
            ``AgentCgroup.for_run``); emptied and removed at the end.
        keep_cgroup: Empty the cgroup at the end but leave it for the next agent
            (removing and making a cgroup costs milliseconds); its owner removes
            it (``SubprocessRunner.close``).
        keep_watch: Whether a sentinel ends ``cgroup`` if this process dies
            (``loop.sentinel``), starting one where none is: asked before the
            spawn (an agent born in a watched cgroup needs no parent-death signal)
            and at each heartbeat while the agent runs.

    Returns:
        A ``ProcessResult``; the agent and every process it started (whatever it
        did: ``setsid``, double fork, ``nohup``, ``env -i``) have ended by then.
    """
    subreaper = become_subreaper()
    started = time.monotonic()
    # Unbuffered: the live view tails these files, and a crash loses nothing.
    stdout_file = create_private(stdout_path)
    stderr_file = create_private(stderr_path)
    try:
        try:
            guarded = keep_watch is not None and keep_watch()
            proc = start_agent(
                argv, cwd=cwd, env=env, stdin_data=stdin_data, cgroup=cgroup, guarded=guarded
            )
        except OSError as error:
            message = f"cannot start {argv[0]}: {error.strerror or error}"
            stderr_file.write(message.encode() + b"\n")
            if cgroup is not None and not keep_cgroup:
                cgroup.remove()
            return ProcessResult(
                EndedBy.LAUNCH_FAILED, None, message, message, 0, 0, time.monotonic() - started
            )
        if cgroup is not None and not cgroup.usable:  # this process could not leave it
            cgroup = None
        agent = AgentGroup(proc, cgroup, keep_cgroup=keep_cgroup, subreaper=subreaper)
        try:
            if on_start is not None:
                on_start(proc.pid)
            return _supervise(
                agent,
                stdin_data,
                stdout_file,
                stderr_file,
                on_line,
                result_seen,
                should_kill,
                limits,
                started,
                keep_watch,
            )
        finally:
            # Whatever happened (even an exception in a callback), no process the
            # agent started outlives this call.
            agent.end(limits.kill_grace_seconds)
    finally:
        stdout_file.close()
        stderr_file.close()


def _feed_stdin(proc: subprocess.Popen[bytes], data: bytes) -> None:
    assert proc.stdin is not None
    with contextlib.suppress(OSError):
        proc.stdin.write(data)
    with contextlib.suppress(OSError):
        proc.stdin.close()


def _start_feeding(proc: subprocess.Popen[bytes], data: bytes) -> None:
    """Write ``data`` to the agent's stdin and close it. What the pipe takes at once
    (a prompt of up to 64 KiB, usually) is written here; only the rest is left to a
    thread, which blocks until the agent reads it."""
    assert proc.stdin is not None
    fd = proc.stdin.fileno()
    written = 0
    try:
        os.set_blocking(fd, False)
        written = os.write(fd, data)
    except BlockingIOError:
        pass
    except OSError:  # the agent is gone already (EPIPE)
        written = len(data)
    with contextlib.suppress(OSError):
        os.set_blocking(fd, True)
    if written < len(data):
        threading.Thread(target=_feed_stdin, args=(proc, data[written:]), daemon=True).start()
        return
    with contextlib.suppress(OSError):
        proc.stdin.close()


def _supervise(
    agent: AgentGroup,
    stdin_data: bytes | None,
    stdout_file: object,
    stderr_file: object,
    on_line: Callable[[str], None],
    result_seen: Callable[[], bool],
    should_kill: Callable[[], bool],
    limits: ProcessLimits,
    started: float,
    keep_watch: Callable[[], bool] | None,
) -> ProcessResult:
    proc = agent.proc
    assert proc.stdout is not None and proc.stderr is not None
    if stdin_data is not None:
        _start_feeding(proc, stdin_data)
    splitter = LineSplitter(limits.max_line_bytes)
    sinks = {
        proc.stdout.fileno(): _Sink(stdout_file, limits.max_raw_bytes),
        proc.stderr.fileno(): _Sink(stderr_file, limits.max_raw_bytes),
    }
    selector = selectors.DefaultSelector()
    for fd in sinks:
        os.set_blocking(fd, False)
        selector.register(fd, selectors.EVENT_READ)
    stderr_tail = bytearray()
    stdout_bytes = 0
    last_output = started
    grace_since: float | None = None
    ended_by: EndedBy | None = None
    was_stopped = False
    last_state_check = started
    last_reap = started
    leader_exited = False
    try:
        while selector.get_map():
            now = time.monotonic()
            if should_kill():
                ended_by = EndedBy.KILLED
                break
            if limits.timeout_seconds is not None and now - started >= limits.timeout_seconds:
                ended_by = EndedBy.TIMEOUT
                break
            idle = now - last_output
            if limits.idle_timeout_seconds is not None and idle >= limits.idle_timeout_seconds:
                ended_by = EndedBy.IDLE_TIMEOUT
                break
            if grace_since is None and (result_seen() or agent.exited()):
                grace_since = now
            if grace_since is not None and now - grace_since >= limits.result_grace_seconds:
                ended_by = EndedBy.RESULT_GRACE
                break
            if idle >= 1.0 and now - last_state_check >= 1.0:
                last_state_check = now
                was_stopped = was_stopped or is_stopped(proc.pid)
            if now - last_reap >= _REAP_SECONDS:
                # Adopted orphans that exited: their pids go back to the system.
                last_reap = now
                reap_adopted(keep=proc.pid)
                sinks[proc.stdout.fileno()].touch()
                if keep_watch is not None:
                    keep_watch()  # a sentinel someone killed or stopped: a new one
            for key, _ in selector.select(_POLL_SECONDS):
                fd = int(key.fd)
                try:
                    data = os.read(fd, _READ_BYTES)
                except BlockingIOError:
                    continue
                except OSError:
                    data = b""
                if not data:
                    selector.unregister(fd)
                    continue
                last_output = time.monotonic()
                sinks[fd].write(data)
                if fd == proc.stdout.fileno():
                    stdout_bytes += len(data)
                    for line in splitter.feed(data):
                        on_line(line.decode("utf-8", "replace"))
                else:
                    stderr_tail += data
                    del stderr_tail[:-_STDERR_TAIL_BYTES]
        if ended_by is None:
            last = splitter.finish()  # a truncated stream's tail
            if last is not None:
                on_line(last.decode("utf-8", "replace"))
            # Both pipes closed: the agent is exiting. Let it, before signalling anyone.
            deadline, pause = time.monotonic() + limits.result_grace_seconds, 0.0005
            if exited_within(proc.pid, limits.result_grace_seconds) is None:
                while not agent.exited() and time.monotonic() < deadline:
                    time.sleep(pause)
                    pause = min(pause * 2, 0.02)
        leader_exited = agent.exited()
    finally:
        selector.close()
        agent.end(limits.kill_grace_seconds)
        with contextlib.suppress(OSError):
            proc.stdout.close()
        with contextlib.suppress(OSError):
            proc.stderr.close()
    if ended_by is None:
        ended_by = EndedBy.EXIT
    return ProcessResult(
        ended_by=ended_by,
        exit_code=proc.returncode,
        launch_error=None,
        stderr_tail=stderr_tail.decode("utf-8", "replace"),
        stdout_bytes=stdout_bytes,
        oversized_lines=splitter.oversized,
        duration_seconds=time.monotonic() - started,
        was_stopped=was_stopped,
        ended_by_driver=not leader_exited,
        raw_truncated=any(sink.truncated for sink in sinks.values()),
        write_error=next((sink.error for sink in sinks.values() if sink.error), None),
    )


class _Sink:
    """Copies raw output to a file, up to a cap; a write error (disk full) stops the
    copy, never the run."""

    def __init__(self, handle: Any, max_bytes: int) -> None:
        self._handle = handle
        self._left = max_bytes
        self.truncated = False
        self.error: str | None = None

    def write(self, data: bytes) -> None:
        if self.error is not None or self.truncated:
            return
        if len(data) > self._left:
            data = data[: self._left]
            self.truncated = True
        self._left -= len(data)
        try:
            self._handle.write(data)
        except OSError as error:
            self.error = f"raw output not saved: {error.strerror or error}"

    def touch(self) -> None:
        """Set the file's modification time to now (the driver's heartbeat)."""
        with contextlib.suppress(OSError, ValueError):
            os.utime(self._handle.fileno())
