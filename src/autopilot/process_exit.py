"""Learning the moment a child process exits, without polling (Linux 5.3+: a pidfd).

``subprocess``'s ``wait(timeout=…)`` (Python 3.14 and older) and a loop of ``waitid``
and sleeps learn of an exit up to one sleep late: the first sleep of ``wait`` alone is
1 ms, as long as a whole ``git status`` that has already exited. A pidfd becomes
readable when its process exits, so one ``poll`` on it wakes at once (CPython 3.15
waits the same way: https://github.com/python/cpython/pull/144047). Nothing here reaps
the process: its status is left for ``waitpid`` (``Popen.wait``).
"""

from __future__ import annotations

import contextlib
import math
import os
import select
import selectors
import signal
import subprocess
import time
from collections.abc import Callable, Mapping
from typing import Any

_READ_BYTES = 65536


def exited_within(pid: int, timeout_seconds: float) -> bool | None:
    """Whether child process ``pid`` has exited, or exits within ``timeout_seconds``
    (a zombie not yet reaped counts as exited).

    Returns:
        True or False; None when this cannot be told without polling: no
        ``os.pidfd_open`` (not Linux, or a kernel older than 5.3), a seccomp filter
        refusing it, no file descriptor left, or no such process (reaped already).
    """
    open_pidfd = getattr(os, "pidfd_open", None)
    if open_pidfd is None:
        return None
    try:
        fd = open_pidfd(pid)
    except OSError:
        return None
    try:
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        # poll is retried after a signal with the time left (PEP 475).
        return bool(poller.poll(max(0, math.ceil(timeout_seconds * 1000))))
    finally:
        os.close(fd)


def communicate(
    process: subprocess.Popen[bytes], input_bytes: bytes | None, timeout_seconds: float
) -> tuple[bytes, bytes]:
    """``process.communicate(input_bytes, timeout=timeout_seconds)`` that returns the
    moment the process exits after closing its pipes, rather than up to one of
    ``wait``'s sleeps later (see the module). ``process`` has ``stdout`` and ``stderr``
    pipes, and a ``stdin`` pipe when ``input_bytes`` is not None.

    Returns:
        Everything it wrote to stdout and to stderr; the process is reaped.

    Raises:
        subprocess.TimeoutExpired: it had not closed its pipes and exited in time
            (it is left running and unreaped, for the caller to end).
    """
    assert process.stdout is not None and process.stderr is not None
    deadline = time.monotonic() + timeout_seconds
    stdin = process.stdin
    if stdin is not None and not input_bytes:
        stdin.close()
        stdin = None
    output = _exchange(
        process.stdout.fileno(),
        process.stderr.fileno(),
        stdin.fileno() if stdin is not None else None,
        stdin.close if stdin is not None else None,
        input_bytes,
        deadline,
    )
    if output is None:
        raise subprocess.TimeoutExpired(process.args, timeout_seconds)
    remaining = max(deadline - time.monotonic(), 0.0)
    if exited_within(process.pid, remaining) is False:
        raise subprocess.TimeoutExpired(process.args, timeout_seconds)
    process.wait(remaining)  # at once when it has exited; else ``wait``'s own polling
    return output


def _exchange(
    stdout_fd: int,
    stderr_fd: int,
    stdin_fd: int | None,
    close_stdin: Callable[[], None] | None,
    input_bytes: bytes | None,
    deadline: float,
) -> tuple[bytes, bytes] | None:
    """Write ``input_bytes`` to ``stdin_fd`` (then ``close_stdin``) while reading both
    output pipes to their ends; None once ``deadline`` (``time.monotonic``) passes."""
    output: dict[int, list[bytes]] = {stdout_fd: [], stderr_fd: []}
    pending = memoryview(input_bytes or b"")
    with selectors.DefaultSelector() as selector:
        for fd in output:
            selector.register(fd, selectors.EVENT_READ)
        if stdin_fd is not None:
            selector.register(stdin_fd, selectors.EVENT_WRITE)
        while selector.get_map():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            for key, _ in selector.select(remaining):
                fd = int(key.fd)
                if fd in output:
                    data = os.read(fd, _READ_BYTES)
                    if data:
                        output[fd].append(data)
                    else:
                        selector.unregister(fd)
                    continue
                try:  # writable: at least PIPE_BUF bytes fit without blocking
                    pending = pending[os.write(fd, pending[: select.PIPE_BUF]) :]
                except BrokenPipeError:  # it stopped reading: the rest is not wanted
                    pending = pending[:0]
                if not pending:
                    selector.unregister(fd)
                    assert close_stdin is not None
                    close_stdin()
    return b"".join(output[stdout_fd]), b"".join(output[stderr_fd])


_DEFAULT_SIGNALS = tuple(
    getattr(signal, name) for name in ("SIGPIPE", "SIGXFZ", "SIGXFSZ") if hasattr(signal, name)
)
"""What ``subprocess`` puts back to the default in a child (``restore_signals``):
Python ignores them, and an ignored signal stays ignored across ``exec``."""


def spawn_and_communicate(
    program: str,
    argv: list[str],
    env: Mapping[str, str],
    input_bytes: bytes | None,
    timeout_seconds: float,
) -> tuple[int, bytes, bytes]:
    """Run ``argv`` with ``program`` (an absolute path) as its executable and ``env``
    as its whole environment, in a session of its own, and ``communicate`` with it:
    what ``subprocess.Popen(argv, executable=program, env=env,
    start_new_session=True)`` and ``communicate`` do, through one ``os.posix_spawn``
    (a vfork in glibc) with no ``Popen`` object, no environment encoded in Python and
    no error pipe. Its stdin is ``input_bytes``, or ``/dev/null`` when that is None
    or empty; its working folder is this process's. Like ``Popen``'s child it
    inherits the standard descriptors only (those this process was given open
    without close-on-exec are closed in it: ``/proc/self/fd`` lists them; where it
    cannot be read, ``Popen`` runs it), and has the signals ``subprocess`` puts back
    to their defaults put back.

    Returns:
        The exit status (``-N``: killed by signal N), stdout and stderr; it is reaped.

    Raises:
        OSError: ``program`` cannot be started (``FileNotFoundError``: no such file).
        subprocess.TimeoutExpired: it had not closed its pipes and exited in time;
            its process group is killed and it is reaped first.
    """
    inherited = _inheritable_descriptors()
    if inherited is None:
        return _popen_and_communicate(program, argv, env, input_bytes, timeout_seconds)
    deadline = time.monotonic() + timeout_seconds
    stdout_read, stdout_write = os.pipe()
    stderr_read, stderr_write = os.pipe()
    stdin_read = stdin_write = -1
    actions: list[tuple[Any, ...]] = [
        (os.POSIX_SPAWN_DUP2, stdout_write, 1),
        (os.POSIX_SPAWN_DUP2, stderr_write, 2),
    ]
    if input_bytes:
        stdin_read, stdin_write = os.pipe()
        actions.append((os.POSIX_SPAWN_DUP2, stdin_read, 0))
    else:
        actions.append((os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0))
    actions += [(os.POSIX_SPAWN_CLOSE, fd) for fd in inherited]
    try:
        pid = os.posix_spawn(
            program, argv, env, file_actions=actions, setsid=True, setsigdef=_DEFAULT_SIGNALS
        )
    except BaseException:
        for fd in (stdout_read, stderr_read, stdin_write):
            if fd >= 0:
                os.close(fd)
        raise
    finally:
        for fd in (stdout_write, stderr_write, stdin_read):
            if fd >= 0:
                os.close(fd)
    stdin_open = [stdin_write] if stdin_write >= 0 else []

    def close_stdin() -> None:
        while stdin_open:
            os.close(stdin_open.pop())

    try:
        output = _exchange(
            stdout_read,
            stderr_read,
            stdin_write if stdin_open else None,
            close_stdin,
            input_bytes,
            deadline,
        )
        if output is not None and exited_within(pid, max(deadline - time.monotonic(), 0)) is False:
            output = None
        if output is None:
            # Its pid still names its group (it is not reaped yet): whatever it started
            # (a filter holding the pipes, say) ends with it.
            with contextlib.suppress(OSError):
                os.killpg(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
    finally:
        close_stdin()
        os.close(stdout_read)
        os.close(stderr_read)
    if output is None:
        raise subprocess.TimeoutExpired(argv, timeout_seconds)
    return os.waitstatus_to_exitcode(status), output[0], output[1]


def _inheritable_descriptors() -> list[int] | None:
    """This process's descriptors past the standard three that a child would inherit;
    None where ``/proc/self/fd`` cannot be read."""
    try:
        names = os.listdir("/proc/self/fd")
    except OSError:
        return None
    found = []
    for name in names:
        fd = int(name)
        if fd > 2:
            try:
                if os.get_inheritable(fd):
                    found.append(fd)
            except OSError:  # the listing's own descriptor, closed since
                pass
    return found


def _popen_and_communicate(
    program: str,
    argv: list[str],
    env: Mapping[str, str],
    input_bytes: bytes | None,
    timeout_seconds: float,
) -> tuple[int, bytes, bytes]:
    """``spawn_and_communicate`` through ``subprocess.Popen``."""
    process = subprocess.Popen(
        argv,
        executable=program,
        env=env,
        stdin=subprocess.PIPE if input_bytes else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    with process:
        try:
            stdout, stderr = communicate(process, input_bytes or None, timeout_seconds)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(OSError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            raise
    return process.returncode, stdout, stderr
