"""What ``status`` says of a hook run: it has no driver, so not "driver none".

A hook run is its session's: ``status`` shows the session it is armed for (or the
claim still open), when a Stop of that session was last answered, and whether the
session's CLI process is alive — as the last Stop found it (``hook.stop.session_cli``),
checked by pid and identity (``runtime.liveness``); before any Stop nothing is known,
and the run is waiting for the next Stop. Its cost is known only where the session's
transcript records one (docs/hooks.md): otherwise ``status`` says so.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autopilot.core.vocabulary import EventType
from autopilot.hook.cut_short import ENDING_FILE
from autopilot.runtime.liveness import process_alive
from autopilot.store.events import read_events
from autopilot.store.hook_registry import Arming, CliProcess, load_armings
from autopilot.store.rundir import RunDir


@dataclass(frozen=True)
class HookRunView:
    """A hook run as ``status`` shows it.

    Attributes:
        armed: The run is in the registry (its session's Stops act on it).
        agent: The CLI whose session it continues ("" when no longer armed and the
            log does not say).
        session_id: The session it is armed for; "" while unclaimed.
        claim_until_ms: While unclaimed: the first Stop of a session of ``agent`` in
            ``project`` until then (epoch ms) claims it.
        project: The project it was armed in.
        last_stop_at_ms: When a Stop of the session was last answered (epoch ms), or
            None.
        cli: The session's CLI process as the last Stop found it, or None.
        cli_alive: Is that process alive (pid and identity)? None: not known.
        cost_known: Some iteration's cost was known (the transcript records cost).
    """

    armed: bool
    agent: str
    session_id: str
    claim_until_ms: int | None
    project: str
    last_stop_at_ms: int | None
    cli: CliProcess | None
    cli_alive: bool | None
    cost_known: bool

    def to_json(self) -> dict[str, Any]:
        """For ``status --json`` (``hook``)."""
        cli = self.cli
        return {
            "armed": self.armed,
            "agent": self.agent or None,
            "sessionId": self.session_id or None,
            "claimUntilMs": self.claim_until_ms,
            "project": self.project or None,
            "lastStopAtMs": self.last_stop_at_ms,
            "cliPid": cli.pid if cli else None,
            "cliCommand": cli.command if cli else None,
            "cliAlive": self.cli_alive,
            "costKnown": self.cost_known,
        }


def hook_run_view(run_dir: Path) -> HookRunView:
    """Read what the registry and the run's log say of the hook run in ``run_dir``."""
    armings, _ = load_armings(run_dir.parent)
    arming = next((a for a in armings if a.run_id == run_dir.name), None)
    logged = _from_log(run_dir)
    if arming is None:
        return HookRunView(
            armed=False,
            agent=logged.agent,
            session_id=logged.session_id,
            claim_until_ms=None,
            project="",
            last_stop_at_ms=None,
            cli=None,
            cli_alive=None,
            cost_known=logged.cost_known,
        )
    return _armed_view(arming, logged.cost_known)


def _armed_view(arming: Arming, cost_known: bool) -> HookRunView:
    cli = arming.cli
    alive = process_alive(cli.pid, cli.start_time, cli.command) if cli else None
    return HookRunView(
        armed=True,
        agent=arming.agent.value,
        session_id=arming.session_id,
        claim_until_ms=None if arming.session_id else arming.claim_until_ms,
        project=arming.project,
        last_stop_at_ms=arming.last_stop_at_ms or None,
        cli=cli,
        cli_alive=alive,
        cost_known=cost_known,
    )


@dataclass(frozen=True)
class _Logged:
    agent: str = ""
    session_id: str = ""
    cost_known: bool = False


def _from_log(run_dir: Path) -> _Logged:
    agent = session = ""
    cost_known = False
    for event in read_events(RunDir(run_dir).events):
        kind = event.get("type")
        if kind == EventType.HOOK_SESSION.value:
            named, owner = event.get("agent"), event.get("sessionId")
            agent = named if isinstance(named, str) else agent
            session = owner if isinstance(owner, str) else session
        elif kind == EventType.ITERATION_END.value:
            cost = event.get("iterationCostUsd")
            cost_known |= isinstance(cost, int | float) and not isinstance(cost, bool)
    return _Logged(agent, session, cost_known)


def hook_health(run_dir: Path, iteration: int, now_ms: int) -> tuple[bool, str]:
    """What ``doctor`` can check of a hook run that has not ended, in place of its
    driver: is it armed, claimed, is its session's CLI alive, was a Stop cut short
    while ending iteration ``iteration``.

    Returns:
        ``(healthy, words)``: False when nothing will continue the run (not armed, or
        its session's CLI is gone).
    """
    view = hook_run_view(run_dir)
    run_id = run_dir.name
    cut = (run_dir / f"iter-{iteration:04d}" / ENDING_FILE).exists()
    cut_note = (
        f"; a Stop was cut short ending iteration {iteration}: the session's next Stop ends it"
        if cut
        else ""
    )
    if not view.armed:
        return False, (
            f"hook run not in the registry of armed runs: no session continues it; "
            f"autopilot stop {run_id} ends it{cut_note}"
        )
    if not view.session_id:
        until = time.strftime("%H:%M:%S", time.localtime((view.claim_until_ms or 0) / 1000))
        if (view.claim_until_ms or 0) >= now_ms:
            return True, (
                f"hook run armed, unclaimed: the first {view.agent} session that stops in "
                f"{view.project} until {until} claims it"
            )
        return True, f"hook run unclaimed since {until}: the next arm, status or list ends it"
    whose = f"hook run of {view.agent} session {view.session_id}"
    cli = view.cli
    if cli is None or view.cli_alive is None:
        return True, f"{whose}: no Stop of it answered yet{cut_note}"
    if view.cli_alive:
        return True, f"{whose}: its CLI is alive (pid {cli.pid}){cut_note}"
    return False, (
        f"{whose}: its CLI (pid {cli.pid}) is gone, so its next Stop never comes; "
        f"autopilot stop {run_id} ends the run{cut_note}"
    )
