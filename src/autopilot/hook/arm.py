"""``autopilot arm``: a run in the runs root, continued by one session's Stop hook.

The run is the driver's kind (its folder, ``state.json``, ``events.jsonl`` and index
row, from ``loop.arming.arm_run``) with ``mode`` ``hook``, plus an entry in the
registry of armed runs naming its session. The session is the one given, else the
one the agent CLI names to a command run inside it (``CLAUDE_CODE_SESSION_ID`` in
Claude Code's Bash tool, ``CODEX_THREAD_ID`` in Codex's shell tool; docs/hooks.md);
else the first Stop of a session of that agent in the project within its claim
window (``CLAIM_WINDOW_SECONDS`` unless given) claims it (recorded with a
``hook_session`` event). A run no session claimed in that window ends (``abort``,
``unclaimed``: ``hook.control.expire_unclaimed``), so it never blocks a new arming.

One session has at most one armed run, and a project at most one unclaimed one: a
second arming is refused (a second loop must not take over the first one's state:
https://github.com/anthropics/claude-code/issues/26514). A ``--backlog`` run owns the
project's backlog while armed: it is refused while another run owns it
(``runtime.locks.ProjectLock``).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from autopilot.config import RunConfig
from autopilot.core.vocabulary import HOOK_MODE, EventType, HookAgent
from autopilot.errors import UsageError
from autopilot.hook.control import Expired, expire_held
from autopilot.hook.run_read import read_run
from autopilot.loop.arming import arm_run
from autopilot.loop.clock import Clock
from autopilot.runtime.locks import ProjectLock
from autopilot.store.events import EventLog
from autopilot.store.hook_registry import Arming, load_armings, locked, remove_arming, write_arming
from autopilot.store.run_state import PromptSource
from autopilot.store.rundir import RunDir

CLAIM_WINDOW_SECONDS = 300
"""How long an arming for no session waits for a session to claim it, by default."""
COST_UNKNOWN_NOTE = (
    "--max-cost binds only where the session's transcript records a cost, and Claude "
    "Code 2.1.197 and Codex 0.171.0 record none: this run's cost may stay unknown "
    "(--max-tokens binds on the transcript's token counts)"
)
"""Said (and logged as a warning) when a hook run is armed with a cost budget."""
SESSION_VARIABLES = {
    HookAgent.CLAUDE: "CLAUDE_CODE_SESSION_ID",
    HookAgent.CODEX: "CODEX_THREAD_ID",
}
"""The variable each CLI's shell tool sets to its session id (docs/hooks.md)."""


def session_from_env(environ: Mapping[str, str]) -> tuple[HookAgent, str] | None:
    """The agent session a command runs inside, from its environment, or None."""
    for agent, variable in SESSION_VARIABLES.items():
        value = environ.get(variable, "").strip()
        if value:
            return agent, value
    return None


@dataclass(frozen=True)
class Armed:
    """A run armed for a session: its id, its registry entry, and the runs that
    arming found unclaimed past their claim window and ended."""

    run_id: str
    arming: Arming
    expired: tuple[Expired, ...] = ()


def _refuse_second(
    root: Path, armings: list[Arming], agent: HookAgent, session: str, cwd: Path
) -> None:
    for other in armings:
        if read_run(root, other.run_id).armed_no_more:
            remove_arming(root, other.run_id)
            continue
        if session and other.session_id == session:
            raise UsageError(
                f"this session already has run {other.run_id} armed; autopilot stop "
                f"{other.run_id} first"
            )
        if (
            not session
            and not other.session_id
            and other.agent is agent
            and (other.project == str(cwd))
        ):
            until = time.strftime("%H:%M:%S", time.localtime(other.claim_until_ms / 1000))
            raise UsageError(
                f"run {other.run_id} is armed in this project and no session has claimed it "
                f"yet (unclaimed, it ends at {until}); autopilot stop {other.run_id} first, "
                "or give --session ID"
            )


def arm_hook_run(
    root: Path,
    config: RunConfig,
    prompt: PromptSource,
    cwd: Path,
    agent: HookAgent,
    session_id: str | None,
    clock: Clock,
    *,
    backlog: bool = False,
    claim_window_seconds: float = CLAIM_WINDOW_SECONDS,
) -> Armed:
    """Create the run and register it for ``session_id`` (None: claimed by the first
    Stop of a session of ``agent`` in ``cwd`` within ``claim_window_seconds``); a cost
    budget is logged with ``COST_UNKNOWN_NOTE``. Runs whose claim window passed
    unclaimed are ended first.

    Raises:
        UsageError: the session (or, unclaimed, the project) already has a run armed.
        ProjectBusyError: with ``backlog``, another run owns this project's backlog.
        RunsRootError/StateFileError: the files cannot be written.
    """
    session = (session_id or "").strip()
    # A backlog has one owner: no driver run, nor another armed run, may work it too
    # (claimed once the runs whose claim window passed have ended).
    claim = ProjectLock(root, cwd, backlog=cwd, work_tree=False) if backlog else None
    with locked(root):
        expired = expire_held(root, clock)
        with claim or contextlib.nullcontext():
            armings, _ = load_armings(root)
            _refuse_second(root, armings, agent, session, cwd)
            run_id = arm_run(root, config, prompt, cwd, clock, mode=HOOK_MODE)
            now_ms = clock.now_ms()
            arming = Arming(
                run_id=run_id,
                agent=agent,
                project=str(cwd),
                session_id=session,
                claim_until_ms=0 if session else now_ms + round(claim_window_seconds * 1000),
                backlog=backlog,
            )
            write_arming(root, arming)
    log = EventLog(RunDir(root / run_id).events, run_id, clock.now_ms)
    try:
        if session:
            log.emit(EventType.HOOK_SESSION, sessionId=session, agent=agent.value, how="armed")
        if config.max_cost_usd is not None:
            log.emit(EventType.WARNING, note=COST_UNKNOWN_NOTE)
    finally:
        log.close()
    return Armed(run_id, arming, tuple(expired))
