"""Learning the moment a child process exits, without polling (Linux 5.3+: a pidfd).

``subprocess``'s ``wait(timeout=…)`` (Python 3.14 and older) and a loop of ``waitid``
and sleeps learn of an exit up to one sleep late: the first sleep of ``wait`` alone is
1 ms, as long as a whole ``git status`` that has already exited. A pidfd becomes
readable when its process exits, so one ``poll`` on it wakes at once (CPython 3.15
waits the same way: https://github.com/python/cpython/pull/144047). Nothing here reaps
the process: its status is left for ``waitpid`` (``Popen.wait``).
"""

from __future__ import annotations

import math
import os
import select
import selectors
import subprocess
import time

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
    output: dict[int, list[bytes]] = {process.stdout.fileno(): [], process.stderr.fileno(): []}
    pending = memoryview(input_bytes or b"")
    with selectors.DefaultSelector() as selector:
        for fd in output:
            selector.register(fd, selectors.EVENT_READ)
        if process.stdin is not None:
            if pending:
                selector.register(process.stdin.fileno(), selectors.EVENT_WRITE)
            else:
                process.stdin.close()
        while selector.get_map():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise subprocess.TimeoutExpired(process.args, timeout_seconds)
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
                    assert process.stdin is not None
                    process.stdin.close()
    remaining = max(deadline - time.monotonic(), 0.0)
    if exited_within(process.pid, remaining) is False:
        raise subprocess.TimeoutExpired(process.args, timeout_seconds)
    process.wait(remaining)  # at once when it has exited; else ``wait``'s own polling
    return b"".join(output[process.stdout.fileno()]), b"".join(output[process.stderr.fileno()])
