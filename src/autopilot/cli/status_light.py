"""``autopilot status`` (plain) of a run its driver runs, or that has ended, from
``state.json``, the log and the inbox read as plain JSON: no typed state
(``store.run_state``, a tree of msgspec Structs), config, snapshot fold or delivery
model, so that it starts in about the time Python takes.

``plain_status`` gives up (None) wherever the typed path
(``cli.control_body.typed_status``, through ``autopilot.control``) would read or
show more than these files say as they are: a ``state.json`` that does not read, or
whose agent or budget come from its ``config`` (a Node-written one); a hook run (its
claim window may end it) or a parallel run (its lanes); a run not ended whose driver
is not known to run (the log may hold its end, ``manage.activity.settled_state``); a
log longer than a short read; a malformed message (the inbox puts it aside).
``control_body.status_lines`` makes the same lines of both, byte for byte
(``tests/cli/test_status_light.py``).
"""

from __future__ import annotations

from pathlib import Path

from autopilot.core.run_words import HOOK_MODE, RunStatus
from autopilot.store.run_files import EVENTS_FILE, STATE_FILE
from autopilot.store.state_file import StateView, read_state_view
from autopilot.store.status_figures import LogFigures, log_figures, pending_counts

TYPE_CHECKING = False  # as typing's, without importing typing at run time
if TYPE_CHECKING:
    from typing import Any

    from autopilot.hook.status import HookRunView


def plain_status(folder: Path, now_ms: int) -> tuple[StatusView, StatusFacts] | None:
    """The state and facts ``autopilot status`` shows (``control_body.status_lines``)
    of the run in ``folder`` at ``now_ms`` (epoch ms), or None where the typed path
    must read it (see the module)."""
    from autopilot.errors import StateFileError

    try:
        view = StatusView(read_state_view(folder / STATE_FILE).data)
    except StateFileError:
        return None
    data = view.data
    if view.mode == HOOK_MODE or "parallel" in data or config_decides(data):
        return None
    from autopilot.runtime.liveness import driver_running, supervisor_alive

    alive = driver_running(folder, view)
    if not view.terminated and alive is not True:
        return None
    figures = log_figures(folder / EVENTS_FILE)
    if figures is None:
        return None
    counts = pending_counts(folder, figures.delivered)
    if counts is None:
        return None
    facts = StatusFacts(
        alive=alive,
        supervisor=supervisor_alive(view),
        pending=counts[0],
        users=counts[1],
        elapsed_ms=elapsed_ms(view, figures, now_ms),
        restored=figures.last_restore,
        excerpt=figures.last_excerpt,
    )
    return view, facts


class StatusFacts:
    """What ``status`` shows besides the state: its driver's and supervisor's liveness
    (``driver_running``, ``supervisor_alive``), the messages waiting (``pending``, of
    them the user's ``users``), the run's time so far (ms, None: unknown), the log's
    last restore and excerpt, and a hook run's view."""

    __slots__ = (
        "alive",
        "elapsed_ms",
        "excerpt",
        "hook",
        "pending",
        "restored",
        "supervisor",
        "users",
    )

    def __init__(
        self,
        *,
        alive: bool | None,
        supervisor: bool | None,
        pending: int,
        users: int,
        elapsed_ms: int | None,
        restored: dict[str, Any] | None,
        excerpt: str | None,
        hook: HookRunView | None = None,
    ) -> None:
        self.alive, self.supervisor = alive, supervisor
        self.pending, self.users = pending, users
        self.elapsed_ms, self.restored, self.excerpt = elapsed_ms, restored, excerpt
        self.hook = hook


def config_decides(data: dict[str, object]) -> bool:
    """Whether ``decode_state`` takes the agent or the budget from the ``config`` (or
    the Node implementation's fields) rather than from ``agent`` and ``max``."""
    agent, budget = data.get("agent"), data.get("max")
    if not isinstance(agent, str) or not agent:
        return True
    if isinstance(budget, bool) or not isinstance(budget, int | float):
        return True
    # ``store.run_state.is_node_written``: its ``iter`` counts the spent iterations.
    return {"iter", "resetOn"} <= data.keys() and not {"status", "config", "spend"} & data.keys()


def elapsed_ms(view: StateView, figures: LogFigures, now_ms: int) -> int:
    """``view.present.elapsed_ms`` of the state and the log's figures: run time so
    far (ms), paused time excluded, frozen at the terminal event."""
    started = float(view.int_of("startedAt"))
    end = (
        float(figures.terminal_at)
        if figures.terminal and figures.terminal_at is not None
        else float(now_ms)
    )
    paused = float(view.total_paused_ms)
    paused_at = view.paused_at_ms
    if view.paused and paused_at is not None:
        paused += max(0.0, end - paused_at)
    return int(max(0.0, end - started - paused))


class _Tokens:
    __slots__ = ("input", "output")

    def __init__(self, given: object) -> None:
        tokens = given if isinstance(given, dict) else {}
        self.input = _whole(tokens.get("input"))
        self.output = _whole(tokens.get("output"))


class SpendView:
    """``spend`` of a ``state.json`` as ``decode_state`` reads it (``Spend``):
    ``cost_usd`` (USD), ``tokens.input``, ``tokens.output`` and ``iterations``."""

    __slots__ = ("cost_usd", "iterations", "tokens")

    def __init__(self, given: object) -> None:
        spend = given if isinstance(given, dict) else {}
        self.cost_usd = float(spend.get("costUsd") or 0.0)
        self.tokens = _Tokens(spend.get("tokens"))
        self.iterations = _whole(spend.get("iterations"))


def _whole(value: object) -> int:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return int(value)
    return 0


class StatusView(StateView):
    """A ``StateView`` with the fields ``status`` prints, each the ``RunState``
    attribute of the same name (for a state ``config_decides`` passes)."""

    __slots__ = ()

    @property
    def agent(self) -> str:
        """``agent``."""
        return self._str("agent") or ""

    @property
    def model(self) -> str | None:
        """``model``."""
        return self._str("model")

    @property
    def iteration(self) -> int:
        """``iter``: the number of the iteration last started."""
        return self.int_of("iter")

    @property
    def max_iterations(self) -> int:
        """``max``: the iteration budget (0: unlimited)."""
        return self.int_of("max")

    @property
    def spend(self) -> SpendView:
        """``spend``."""
        return SpendView(self.data.get("spend"))

    @property
    def waiting_until_ms(self) -> int | None:
        """``waitingUntil`` (epoch ms)."""
        return self._int_or_none("waitingUntil")

    @property
    def gate(self) -> str | None:
        """``gate``: the question the run waits on a person for."""
        return self._str("gate")

    @property
    def agent_pid(self) -> int | None:
        """``agentPid``."""
        return self._int_or_none("agentPid")

    @property
    def agent_start_time(self) -> float | None:
        """``agentStartTime`` (epoch s)."""
        return self._float_or_none("agentStartTime")

    @property
    def agent_env(self) -> tuple[str, ...] | None:
        """``agentEnv``: the names of the agent's variables the run started with."""
        names = self.data.get("agentEnv")
        return None if names is None else tuple(names)

    @property
    def env_missing(self) -> tuple[str, ...]:
        """``envMissing``: those the current driver lacks."""
        return tuple(self.data.get("envMissing") or ())

    @property
    def termination_note(self) -> str | None:
        """``terminationNote``."""
        return self._str("terminationNote")

    @property
    def completed(self) -> bool:
        """The run ended by completing."""
        return self.terminated and self.status is RunStatus.COMPLETED
