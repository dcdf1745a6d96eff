"""autopilot's own run of a prompt run's verify commands (``--verify CMD``).

When the agent gives the completion promise in a run armed with verify commands,
the driver runs each of them in the work tree the way it runs a work item's
``check`` (``loop.checks``: the user's shell, its own process group, a timeout, the
output saved in the iteration's folder as ``check-verify<N>.log``) and hands what
they found to ``conclude`` (``core.verification``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from autopilot.core.attempt import Verification
from autopilot.core.workitems import Criterion
from autopilot.loop.checks import DEFAULT_CHECK_TIMEOUT_SECONDS, run_checks


def run_verify(
    commands: Sequence[str],
    *,
    cwd: Path,
    folder: Path,
    timeout_seconds: float = DEFAULT_CHECK_TIMEOUT_SECONDS,
    env: Mapping[str, str] | None = None,
    should_stop: Callable[[], bool] = lambda: False,
) -> Verification:
    """Run every verify command, in order, and say what they found.

    Args:
        commands: The run's verify commands (shell command lines).
        cwd: The work tree.
        folder: The iteration's folder (each command's output is saved there).
        timeout_seconds: Per command.
        env: Their environment (default ``os.environ``).
        should_stop: Polled while a command runs; True ends it (it fails).

    Returns:
        Passed only if every command exited 0; one ``$ CMD: exit N`` line per
        command; the failing commands with the tails of their output.
    """
    criteria = [
        Criterion(id=f"verify{number}", text=command, check=command)
        for number, command in enumerate(commands, 1)
    ]
    run = run_checks(
        criteria,
        cwd=cwd,
        folder=folder,
        timeout_seconds=timeout_seconds,
        env=env,
        stop=should_stop,
    )
    lines = tuple(f"$ {r.command}: {r.status_text()}" for r in run.results)
    failing = tuple(
        line for line, result in zip(lines, run.results, strict=True) if not result.passed
    )
    return Verification(
        passed=run.outcome.passed,
        results=lines,
        failing=failing,
        digest=run.outcome.digest,
        failure=run.outcome.failure,
    )
