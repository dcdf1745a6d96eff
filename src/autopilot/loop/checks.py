"""autopilot's own run of a work item's ``check`` commands (the completion evidence).

A criterion's ``check`` is the user's own command from ``tasks.jsonl``, so it runs
through the user's shell (``$SHELL -c CHECK``, else ``/bin/sh``) in the work tree —
the one place autopilot uses a shell. Each check gets its own process group, stdin
``/dev/null``, a timeout, and when it ends (or times out, or the caller stops it, or
an error ends the wait) its whole group is ended, and then every process it started
that is still alive (autopilot is a child subreaper where Linux allows, so a ``setsid``
child stays in its tree: ``loop.descendants``), so a check that leaves a child
behind or hangs cannot hold the run nor outlive it; its shell also gets a parent-death signal, so it
does not outlive a caller killed outright. What it printed (stdout and stderr
together) is saved in the iteration's folder as ``check-<criterion>.log`` (the first
``MAX_SAVED_OUTPUT_BYTES``; mode 0600, like the run's other files), and all of it goes
into ``completion_check_digest``: ``sha256:`` + the hex SHA-256 of, for each check in
order, ``<criterion id> NUL <command> NUL <output> NUL <exit status> NUL``.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from autopilot.core.digest import Hash, sha256
from autopilot.core.item_report import CheckOutcome
from autopilot.core.workitems import Criterion
from autopilot.loop.agent_group import child_setup
from autopilot.loop.descendants import end_all, reap_adopted, start_ticks, started_processes
from autopilot.loop.subreaper import become_subreaper
from autopilot.store.private import create_private, write_private

DEFAULT_CHECK_TIMEOUT_SECONDS = 600.0
MAX_SAVED_OUTPUT_BYTES = 4 * 1024 * 1024
"""Each check's saved output is cut here (the digest covers all of it)."""

OUTPUT_TAIL_BYTES = 3000
"""How much of a failing check's output goes into the next prompt."""

_END_GRACE_SECONDS = 2.0
_EOF_GRACE_SECONDS = 0.5
_READ_BYTES = 65536


@dataclass(frozen=True)
class CheckResult:
    """One check as it ran.

    Attributes:
        criterion_id: The criterion it verifies.
        command: The command as written in ``tasks.jsonl``.
        exit_code: Its exit status (negative: killed by that signal); None if it
            timed out or could not start.
        timed_out: True if it ran past the timeout and was ended.
        output_tail: The end of what it printed (UTF-8, bad bytes replaced).
        log_path: Where its output was saved.
        duration_ms: How long it ran.
        error: Why it could not start, if it could not.
        stopped: True if the caller stopped it (``run_checks``'s ``stop``).
    """

    criterion_id: str
    command: str
    exit_code: int | None
    timed_out: bool
    output_tail: str
    log_path: Path
    duration_ms: int
    error: str | None = None
    stopped: bool = False

    @property
    def passed(self) -> bool:
        """True if it exited 0."""
        return self.exit_code == 0

    def status_text(self) -> str:
        """``exit 0``, ``exit 1``, ``timed out after 600 s``, ``stopped`` or
        ``could not start: …``."""
        if self.stopped:
            return "stopped"
        if self.error is not None:
            return f"could not start: {self.error}"
        if self.timed_out:
            return f"timed out after {self.duration_ms // 1000} s"
        return f"exit {self.exit_code}"


@dataclass(frozen=True)
class CheckRun:
    """Every check of an item, and what they add up to."""

    results: tuple[CheckResult, ...]
    outcome: CheckOutcome

    @property
    def stopped(self) -> bool:
        """A stop ended a check: the outcome is no evidence either way."""
        return any(r.stopped for r in self.results)


def user_shell(environ: Mapping[str, str] | None = None) -> str:
    """The user's shell: ``$SHELL`` if it is an absolute path to an executable, else /bin/sh."""
    shell = (os.environ if environ is None else environ).get("SHELL", "")
    if os.path.isabs(shell) and os.access(shell, os.X_OK) and os.path.isfile(shell):
        return shell
    return "/bin/sh"


def run_checks(
    criteria: Sequence[Criterion],
    *,
    cwd: Path,
    folder: Path,
    timeout_seconds: float = DEFAULT_CHECK_TIMEOUT_SECONDS,
    env: Mapping[str, str] | None = None,
    stop: Callable[[], bool] | None = None,
) -> CheckRun:
    """Run the ``check`` of every criterion that has one, in order.

    Args:
        criteria: The item's acceptance criteria (those without ``check`` are skipped).
        cwd: The work tree.
        folder: Where each check's output is saved (the iteration's folder).
        timeout_seconds: Per check.
        env: The environment (default ``os.environ``).
        stop: Asked while a check runs: True ends it at once (its group ended, the
            result ``stopped``) and skips the checks after it.

    Returns:
        The results, and the outcome: passed only if every check exited 0; a
        ``sha256:`` digest when any check ran; one evidence line per check; for a
        failure, each failing command and the tail of its output.
    """
    environ = dict(os.environ if env is None else env)
    shell = user_shell(environ)
    digest = sha256()
    results: list[CheckResult] = []
    for criterion in criteria:
        if criterion.check is None:
            continue
        log_path = folder / f"check-{criterion.id}.log"
        digest.update(f"{criterion.id}\0{criterion.check}\0".encode())
        result = _run_one(criterion, shell, cwd, environ, log_path, timeout_seconds, digest, stop)
        status = result.exit_code if result.exit_code is not None else "none"
        digest.update(f"\0{status}\0".encode())
        results.append(result)
        if result.stopped:
            break
    if not results:
        return CheckRun((), CheckOutcome(passed=True))
    failing = [r for r in results if not r.passed]
    failure = "\n\n".join(
        f"check {r.criterion_id} ($ {r.command}) {r.status_text()}; its output ended with:\n"
        f"{r.output_tail or '(nothing)'}"
        for r in failing
    )
    return CheckRun(
        tuple(results),
        CheckOutcome(
            passed=not failing,
            digest="sha256:" + digest.hexdigest(),
            evidence=tuple(
                f"[completion-check] {r.criterion_id}: {r.status_text()}" for r in results
            ),
            failure=failure or None,
        ),
    )


def _run_one(
    criterion: Criterion,
    shell: str,
    cwd: Path,
    env: Mapping[str, str],
    log_path: Path,
    timeout_seconds: float,
    digest: Hash,
    stop: Callable[[], bool] | None,
) -> CheckResult:
    command = criterion.check or ""
    started = time.monotonic()
    become_subreaper()  # what the check orphans (setsid, double fork) stays in sight
    read_fd, write_fd = os.pipe()
    try:
        process = subprocess.Popen(
            [shell, "-c", command],
            cwd=cwd,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=write_fd,
            stderr=write_fd,
            start_new_session=True,
            close_fds=True,
            preexec_fn=child_setup(None),  # noqa: PLW1509 - os calls only after fork
        )
    except OSError as error:
        os.close(read_fd)
        os.close(write_fd)
        write_private(log_path, b"")
        return CheckResult(
            criterion.id, command, None, False, "", log_path, 0, error.strerror or str(error)
        )
    os.close(write_fd)
    since = start_ticks(process.pid)  # read while the shell cannot have been reaped
    deadline = started + timeout_seconds
    tail = b""
    saved = 0
    timed_out = stopped = False
    exited_at: float | None = None
    try:
        with create_private(log_path) as log, os.fdopen(read_fd, "rb", buffering=0) as pipe:
            while True:
                now = time.monotonic()
                if stop is not None and stop():
                    stopped = True
                    break
                if exited_at is None and process.poll() is not None:
                    exited_at = now
                if exited_at is not None and now - exited_at >= _EOF_GRACE_SECONDS:
                    break  # a child left behind holds the pipe: ending the group closes it
                if now >= deadline:
                    timed_out = exited_at is None
                    break
                ready, _, _ = select.select([pipe], [], [], min(0.2, max(0.0, deadline - now)))
                if not ready:
                    continue
                chunk = pipe.read(_READ_BYTES)
                if not chunk:
                    if exited_at is not None or process.poll() is not None:
                        break
                    continue
                digest.update(chunk)
                if saved < MAX_SAVED_OUTPUT_BYTES:
                    log.write(chunk[: MAX_SAVED_OUTPUT_BYTES - saved])
                    saved += len(chunk)
                tail = (tail + chunk)[-OUTPUT_TAIL_BYTES:]
    finally:
        _end_group(process, since)
    exit_code = None if timed_out or stopped else process.returncode
    return CheckResult(
        criterion.id,
        command,
        exit_code,
        timed_out,
        tail.decode("utf-8", errors="replace"),
        log_path,
        int((time.monotonic() - started) * 1000),
        stopped=stopped,
    )


def _end_group(process: subprocess.Popen[bytes], since: int | None) -> None:
    """TERM the check's process group, then KILL what is left after a grace period;
    then end every process the check started that is still alive, in its group or
    not (``descendants.started_processes``: a ``setsid`` child too), and collect the
    orphans this process adopted."""
    pgid = process.pid
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGTERM)
    try:
        process.wait(timeout=_END_GRACE_SECONDS)
    except subprocess.TimeoutExpired:
        pass
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=_END_GRACE_SECONDS)
    if since is not None:
        end_all(lambda: started_processes(pgid, since), grace_seconds=_END_GRACE_SECONDS)
    reap_adopted()
