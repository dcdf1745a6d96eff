"""The supervisor's restart policy, as a pure function (``docs/architecture.md``,
"Detached runs").

The supervisor starts the daemon again when it exits with the run still active — which
is what a crash, a ``kill -9`` or an OOM kill looks like — and never after a stop, a
gate, a terminal event, or a daemon that left on purpose. More than ``RESTART_LIMIT``
restarts within ``RESTART_WINDOW_MS`` is a daemon that cannot run: the supervisor gives
up, and the run ends in ``error`` with one ``abort`` (reason ``supervisor_giveup``). A
daemon that exits with a usage error (exit 2: the run as armed cannot be driven) is
given up at once, with its error as the note.
With the project's OFF switch set nothing is restarted (an automatic relaunch is a
proactive action, which the OFF switch forbids).
"""

from __future__ import annotations

import signal
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from autopilot.core.vocabulary import HOOK_MODE, PARALLEL_MODE

RESTART_LIMIT = 5
"""Restarts allowed within the window; one more crash is a give-up."""

RESTART_WINDOW_MS = 5 * 60 * 1000
"""The window the restarts are counted in, in milliseconds."""

USAGE_EXIT_CODE = 2
"""The daemon's exit for a usage error (``UsageError``: the run as armed cannot be
driven, e.g. its program is not an executable file): starting it again cannot help."""

PROJECT_BUSY_EXIT_CODE = 5
"""The daemon's exit when another run is active in the same work tree: it is left
alone (not restarted) until that run has ended and it is started again."""

_WAITING_FOR_USER = frozenset({"gated", "awaiting_user"})


@dataclass(frozen=True)
class DaemonExit:
    """How the daemon process ended.

    Attributes:
        code: Its exit status, or None when a signal ended it.
        signal: The signal that ended it, or None.
        error: The last line it wrote on stderr, when that explains the exit.
    """

    code: int | None
    signal: int | None = None
    error: str | None = None

    @classmethod
    def from_returncode(cls, returncode: int) -> DaemonExit:
        """From ``Popen.returncode`` (negative: the signal that ended it)."""
        if returncode < 0:
            return cls(None, -returncode)
        return cls(returncode)

    def describe(self) -> str:
        """``exit code 1``, ``signal SIGKILL`` or ``exit status unknown``."""
        if self.code is None and self.signal is None:
            return "exit status unknown"
        if self.signal is not None:
            try:
                return f"signal {signal.Signals(self.signal).name}"
            except ValueError:
                return f"signal {self.signal}"
        return f"exit code {self.code}"


@dataclass(frozen=True)
class RunFacts:
    """What the supervisor knows about the run once its daemon has exited.

    Attributes:
        terminated: ``state.json`` or the log says the run ended.
        stop_requested: A stop was asked for and not yet recorded as an ending.
        status: ``state.json``'s status.
        off: The project's OFF switch is set.
        driven_elsewhere: Another process holds the run's ``driver.lock``.
    """

    terminated: bool
    stop_requested: bool
    status: str
    off: bool
    driven_elsewhere: bool


class Verdict(StrEnum):
    """What the supervisor does next."""

    RESTART = "restart"
    GIVE_UP = "give_up"
    FINISH_STOP = "finish_stop"
    LEAVE = "leave"
    DONE = "done"


@dataclass(frozen=True)
class RestartDecision:
    """The verdict, why, and the restart times (epoch ms) to keep in ``state.json``."""

    verdict: Verdict
    reason: str
    restarts_ms: tuple[int, ...]


def decide_restart(
    ended: DaemonExit,
    facts: RunFacts,
    restarts_ms: Sequence[int],
    now_ms: int,
    *,
    limit: int = RESTART_LIMIT,
    window_ms: int = RESTART_WINDOW_MS,
) -> RestartDecision:
    """Decide what follows the daemon's exit.

    Args:
        ended: How the daemon ended.
        facts: The run, read after the exit.
        restarts_ms: When earlier restarts happened (epoch ms), oldest first.
        now_ms: Now, epoch ms.
        limit: Restarts allowed within ``window_ms``.
        window_ms: The window, in milliseconds.

    Returns:
        ``DONE`` for a run that ended, ``LEAVE`` for one another driver holds, that
        waits for the user, is OFF, whose daemon left on purpose (exit 0) or was
        refused because another run is active in its work tree
        (``PROJECT_BUSY_EXIT_CODE``),
        ``FINISH_STOP`` for a stop that was asked for, ``GIVE_UP`` at once for a usage
        error (``USAGE_EXIT_CODE``) and after more than ``limit`` restarts within the
        window, else ``RESTART``.
    """
    recent = tuple(t for t in restarts_ms if 0 <= now_ms - t < window_ms)
    if facts.terminated:
        return RestartDecision(Verdict.DONE, "the run ended", recent)
    if facts.driven_elsewhere:
        return RestartDecision(Verdict.LEAVE, "another driver holds the run", recent)
    if facts.stop_requested:
        return RestartDecision(Verdict.FINISH_STOP, "a stop was requested", recent)
    if facts.status in _WAITING_FOR_USER:
        return RestartDecision(
            Verdict.LEAVE, f"the run is {facts.status}: it waits for you", recent
        )
    if facts.off:
        return RestartDecision(Verdict.LEAVE, "autopilot is OFF in this project", recent)
    if ended.signal is None and ended.code == 0:
        return RestartDecision(Verdict.LEAVE, "the daemon left on purpose", recent)
    if ended.signal is None and ended.code == PROJECT_BUSY_EXIT_CODE:
        why = ended.error or "another run is active in its work tree"
        return RestartDecision(Verdict.LEAVE, why, recent)
    if ended.signal is None and ended.code == USAGE_EXIT_CODE:
        why = ended.error or ended.describe()
        return RestartDecision(Verdict.GIVE_UP, f"the daemon cannot drive the run: {why}", recent)
    if len(recent) >= limit:
        return RestartDecision(
            Verdict.GIVE_UP,
            f"the daemon ended {len(recent) + 1} times within "
            f"{window_ms // 60000} minutes (last: {ended.describe()})",
            recent,
        )
    return RestartDecision(
        Verdict.RESTART, f"the daemon ended ({ended.describe()})", (*recent, now_ms)
    )


RELAUNCH_STATUSES = frozenset({"running", "planning", "waiting", "rate_limited"})
"""Statuses a run left in is relaunched from by bare ``autopilot`` (after a reboot,
say); a paused, gated or ended run is not: the decision is the user's."""


def relaunch_verdict(
    *,
    status: str,
    terminated: bool,
    daemon_alive: bool | None,
    supervisor_alive: bool | None,
    off: bool,
    mode: str = "prompt",
    env_missing: Sequence[str] = (),
) -> str | None:
    """Why a run must not be relaunched automatically, or None when it should be.

    Args:
        status: ``state.json``'s status.
        terminated: The run ended.
        daemon_alive: The liveness of its recorded daemon (None: none recorded); a
            check that cannot answer is True, so a live daemon is never doubled.
        supervisor_alive: The same for its supervisor, which restarts the daemon itself.
        off: The project's OFF switch is set (no automatic relaunch).
        mode: The run's mode; a ``hook`` run lives in its agent session's Stop hook
            and has no daemon to relaunch, nor has a ``parallel`` run (its lanes do).
        env_missing: The agent's variables the run started with that the relaunching
            environment lacks: its agent would start without them (not logged in).
    """
    if terminated:
        return "it has ended"
    if mode == HOOK_MODE:
        return "it runs in its agent session's Stop hook: prompt that session to go on"
    if mode == PARALLEL_MODE:
        return "it is a parallel run: its agents' runs are relaunched on their own"
    if daemon_alive and supervisor_alive is False:
        return "its daemon is running without its supervisor: autopilot start adopts it"
    if daemon_alive:
        return "its daemon is running"
    if supervisor_alive:
        return "its supervisor is running"
    if off:
        return "autopilot is OFF in its project"
    if status not in RELAUNCH_STATUSES:
        return f"it is {status or 'in no status'}: start it with autopilot start"
    if env_missing:
        return env_missing_note(env_missing)
    return None


def env_missing_note(env_missing: Sequence[str]) -> str:
    """Why a run is not relaunched from an environment that lacks ``env_missing``,
    the agent's variables the run started with, and how to go on."""
    names = ", ".join(env_missing)
    return (
        f"its agent started with {names}, which this environment lacks (its agent would "
        f"not be logged in): autopilot start it from a shell that has "
        f"{'it' if len(env_missing) == 1 else 'them'}"
    )


@dataclass(frozen=True)
class RelaunchCandidate:
    """A run left active, as bare ``autopilot`` sees it.

    Attributes:
        run_id: The run.
        cwd: Its work tree.
        started_at_ms: When it was armed (epoch ms).
        why_not: Why it must not be relaunched (``relaunch_verdict``), or None.
        driven: Its daemon or supervisor is alive.
    """

    run_id: str
    cwd: str
    started_at_ms: int
    why_not: str | None
    driven: bool = False


def one_per_work_tree(candidates: Sequence[RelaunchCandidate]) -> list[tuple[str, str | None]]:
    """At most one relaunch per work tree: the newest run that may be relaunched, none
    where a run is already driven. Every other run says why it is left alone.

    Returns:
        ``(run_id, why_not)`` for each candidate, in the given order.
    """
    chosen: dict[str, RelaunchCandidate] = {}
    for run in candidates:
        if run.driven:
            chosen[run.cwd] = run
        elif run.why_not is None:
            held = chosen.get(run.cwd)
            if held is None or (not held.driven and run.started_at_ms > held.started_at_ms):
                chosen[run.cwd] = run
    verdicts = []
    for run in candidates:
        why = run.why_not
        other = chosen.get(run.cwd)
        if why is None and other is not None and other is not run:
            how = "is running" if other.driven else "is relaunched"
            why = (
                f"run {other.run_id} {how} in the same directory; start this one with "
                "autopilot start once that one has ended"
            )
        verdicts.append((run.run_id, why))
    return verdicts
