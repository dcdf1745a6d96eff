"""The body of ``autopilot status [RUN]`` and its lines, without click: the command
line (``cli.control_cmds``) and the fast path (``cli.fast``) both call it (``pause``,
``resume`` and ``stop`` are ``cli.control_light``'s). Its plain form reads a run its
driver runs, or that has ended, as plain JSON (``cli.status_light``), every other
case through ``autopilot.control``; ``status_lines`` prints both."""

from __future__ import annotations

import time
from pathlib import Path

from autopilot.cli.echo import say, say_json
from autopilot.core.run_words import RunStatus
from autopilot.errors import StateFileError
from autopilot.store.paths import resolve_run, run_dir, runs_root
from autopilot.store.project_files import run_off_switch
from autopilot.view.safe import shown

# ``autopilot.control`` and the typed state (for ``status --json`` and the rare runs
# ``cli.status_light`` leaves to it), the views of time and ending, liveness and lanes
# are loaded by the functions that use them: each case loads only its own.

TYPE_CHECKING = False  # as typing's, without importing typing at run time
if TYPE_CHECKING:
    from autopilot.cli.status_light import StatusFacts, StatusView
    from autopilot.hook.status import HookRunView
    from autopilot.store.run_state import RunState

    State = RunState | StatusView


def _driver_lines(state: State, facts: StatusFacts, now_ms: int) -> list[str]:
    """The ``cost`` and ``driver`` lines, or a hook run's (``hook_lines``)."""
    if facts.hook is not None:
        from autopilot.store.run_state import RunState

        if isinstance(state, RunState):  # ``cli.status_light`` leaves hooks to the typed path
            return hook_lines(state, facts.hook, now_ms)
    alive = {True: "alive", False: "gone", None: "none"}[facts.alive]
    relaunch = (
        f" — relaunch: autopilot start {state.run_id}; end it: autopilot stop {state.run_id}"
        if facts.alive is False and not state.terminated
        else ""
    )
    return [
        f"cost       ${state.spend.cost_usd:.4f}",
        f"driver     {alive}" + (f" (pid {state.pid})" if state.pid else "") + relaunch,
    ]


def ending_of(state: State) -> str:
    """``describe_ending`` for a terminated run's state."""
    from autopilot.core.ending import describe_ending

    return describe_ending(state.termination_reason, completed=state.completed)


def worktree_of(state: State) -> dict[str, str] | None:
    """A ``--worktree`` run's ``worktree`` record in ``state.json`` (``path``,
    ``branch``, ``base``, ``origin``), or None; read here without loading git code."""
    record = state.extra.get("worktree")
    if not isinstance(record, dict):
        return None
    keys = ("path", "branch", "base", "origin")
    if not all(isinstance(record.get(key), str) and record.get(key) for key in keys):
        return None
    return {key: str(record[key]) for key in keys}


def status_text(state: State, now_ms: int) -> str:
    """The run's status in words: how it ended, or its status with what is pending.

    ``completed (completion_promise)``, ``stopped by the user``; ``running (stop
    requested)``, ``running (pause requested)``, ``paused``, ``paused — held by
    <project>/.autopilot/OFF: `autopilot on` releases it``, ``rate_limited until
    19:00:00``.
    """
    if state.terminated:
        return ending_of(state)
    status = state.status.value
    until = state.waiting_until_ms
    if state.status in (RunStatus.RATE_LIMITED, RunStatus.WAITING) and until is not None:
        from autopilot.view.plain import format_moment

        status += f" until {format_moment(until, day_of_ms=now_ms)}"
    if state.stop_requested or state.stop_now:
        return status + (" (stop --now requested)" if state.stop_now else " (stop requested)")
    off = run_off_switch(state)
    if off is not None:
        held = f"held by {off}: `autopilot on` releases it"
        if state.status is not RunStatus.PAUSED:
            return f"{status} (holds at the next boundary: {held})"
        return f"{status} — {held}" + (", then `autopilot resume`" if state.paused else "")
    if state.paused and state.status is not RunStatus.PAUSED:
        return status + " (pause requested)"
    if state.gate is not None:
        return status + f" — waits for your answer: {state.gate} (autopilot answer TEXT)"
    if state.hold is not None and state.status in (RunStatus.PAUSED, RunStatus.WAITING):
        return status + f" — {state.hold}"
    return status


def hook_lines(state: RunState, hook: HookRunView, now_ms: int) -> list[str]:
    """A hook run's ``cost`` line and, in place of ``driver``, what it is: ``mode``
    (the session it is armed for), ``last stop`` and ``session`` (its CLI process)."""
    from autopilot.view.plain import format_moment
    from autopilot.view.present import fmt_duration

    spend = state.spend
    if hook.cost_known or spend.cost_usd > 0:
        cost = f"${spend.cost_usd:.4f}"
    else:
        cost = "unknown: the session's transcript records no cost"
        if state.config.max_cost_usd is not None:
            cost += f" (--max-cost ${state.config.max_cost_usd:g} cannot bind)"
    agent = hook.agent or state.agent or "agent"
    if hook.session_id:
        mode = f"hook: {_field(agent)} session {_field(hook.session_id)}"
    elif hook.armed and hook.claim_until_ms is not None:
        until = format_moment(hook.claim_until_ms, day_of_ms=now_ms)
        where = _field(hook.project)
        if hook.claim_until_ms >= now_ms:
            mode = f"hook: the first {agent} session that stops in {where} until {until} claims it"
        else:
            mode = f"hook: no {agent} session stopped in {where} before {until}; nothing claims it"
    else:
        mode = "hook"
    if not hook.armed:
        mode += " (no longer armed)" if state.terminated else " (not in the registry)"
    lines = [f"cost       {cost}", f"mode       {mode}"]
    if not hook.armed:
        return lines
    if hook.last_stop_at_ms is not None:
        ago = fmt_duration(max(now_ms - hook.last_stop_at_ms, 0))
        lines.append(
            f"last stop  {format_moment(hook.last_stop_at_ms, day_of_ms=now_ms)} ({ago} ago)"
        )
    else:
        lines.append("last stop  none yet")
    cli = hook.cli
    if cli is None or hook.cli_alive is None:
        lines.append("session    waiting for the next Stop")
    elif hook.cli_alive:
        lines.append(f"session    alive (pid {cli.pid})")
    else:
        lines.append(
            f"session    gone (pid {cli.pid}): its next Stop never comes; "
            f"autopilot stop {state.run_id} ends the run"
        )
    return lines


def messages_text(user: int, pending: int, state: State) -> str | None:
    """What ``status`` says of messages not yet delivered: ``user`` of the ``pending``
    are the user's, the rest autopilot's own notices (a reopened item, a budget
    warning), which are moot once the run ended; None when there is nothing to say."""
    notices = pending - user
    if state.terminated:
        if not user:
            return None
        return f"{user} of yours never delivered (the run ended first)"
    parts = [f"{user} of yours"] if user else []
    if notices:
        parts.append(f"{notices} autopilot notice{'' if notices == 1 else 's'}")
    return f"{' and '.join(parts)} waiting for the next iteration" if parts else None


MAX_BLOCKED_LINES = 5
"""Blocked work items ``status`` names (the rest are counted)."""


def blocked_lines(state: State) -> list[str]:
    """``status`` lines for a backlog run's blocked work items and why, as the
    project's ``tasks.jsonl`` has them now (nothing if it cannot be read)."""
    if state.mode != "backlog" or state.cwd is None:
        return []
    from autopilot.core.workitems import ItemStatus
    from autopilot.errors import AutopilotError
    from autopilot.store.backlog import Backlog
    from autopilot.workspace.worktrees import RunWorktree, project_home

    try:
        home = project_home(Path(state.cwd), RunWorktree.from_json(state.extra.get("worktree")))
        items = Backlog(home, runs_root(create=False) / ".locks").read().items
    except (AutopilotError, OSError, ValueError):
        return []
    blocked = [i for i in items if i.status is ItemStatus.BLOCKED]
    lines = [
        f"blocked    {_field(i.id)}: {_field(i.blocked_reason or 'no reason given')}"
        for i in blocked[:MAX_BLOCKED_LINES]
    ]
    if len(blocked) > MAX_BLOCKED_LINES:
        lines.append(
            f"blocked    and {len(blocked) - MAX_BLOCKED_LINES} more (autopilot tasks list)"
        )
    return lines


def env_text(state: State) -> str:
    """What ``status`` says of the agent's environment: the names of its variables the
    run started with (never their values), and those the current driver lacks. A
    supervisor's restart keeps the daemon's environment; a relaunch (``start``, bare
    ``autopilot``, the login service) passes on its own."""
    if state.env_missing:
        return (
            f"lacks {_field(', '.join(state.env_missing))}, which the run started with: "
            "autopilot start it from a shell that has them"
        )
    names = ", ".join(state.agent_env or ()) or "none of the agent's variables"
    return f"{_field(names)} (a relaunch passes on its own shell's environment)"


def orphan_agent_line(state: State, driver_alive: bool | None) -> str | None:
    """The ``agent`` line of a run whose driver is gone while the agent it recorded
    (``agentPid``, same start time) still runs, e.g. after ``kill -9`` of both daemon
    and supervisor; None otherwise."""
    if state.terminated or driver_alive is not False or state.agent_pid is None:
        return None
    from autopilot.runtime.liveness import process_alive

    if not process_alive(state.agent_pid, state.agent_start_time, None, state.host):
        return None
    return (
        f"agent      still running (pid {state.agent_pid}) without its driver: "
        f"autopilot stop {state.run_id} ends it"
    )


def _field(value: object) -> str:
    """One value of a status line, on one line whatever it holds."""
    return shown(str(value))


def _run_dir(run_ref: str | None) -> Path:
    root = runs_root(create=False)
    run_id = resolve_run(root, run_ref, project=None if run_ref else Path.cwd().resolve())
    return run_dir(root, run_id)


def status(as_json: bool, run_ref: str | None) -> int:
    """``autopilot status [--json] [RUN]``; its exit code.

    The plain form of a run its driver runs (or that has ended) reads ``state.json``,
    the log and the inbox as plain JSON (``cli.status_light``); ``--json`` and every
    other case read the typed state through ``autopilot.control``, and print the
    same lines (``tests/cli/test_status_light.py``).

    Raises:
        StateFileError: the run's ``state.json`` cannot be read (with the way out).
    """
    folder = _run_dir(run_ref)
    now_ms = int(time.time() * 1000)
    if not as_json:
        plain = plain_status_lines(folder, now_ms)
        if plain is not None:
            say("\n".join(plain))
            return 0
    return typed_status(folder, as_json, now_ms)


def plain_status_lines(folder: Path, now_ms: int) -> list[str] | None:
    """``status_lines`` of the run in ``folder`` at ``now_ms`` (epoch ms) from its files
    read as plain JSON (``cli.status_light.plain_status``), or None where the typed
    path must read it."""
    from autopilot.cli.status_light import plain_status

    read = plain_status(folder, now_ms)
    return None if read is None else status_lines(read[0], read[1], now_ms)


def typed_status(folder: Path, as_json: bool, now_ms: int) -> int:
    """``autopilot status [--json]`` of the run in ``folder`` through
    ``autopilot.control``; its exit code.

    Raises:
        StateFileError: the run's ``state.json`` cannot be read (with the way out).
    """
    from autopilot import control
    from autopilot.cli.status_light import StatusFacts
    from autopilot.store.rundir import RunDir
    from autopilot.view.present import elapsed_ms

    try:
        report = control.status(folder)
    except StateFileError as unreadable:
        if unreadable.errno is not None or not RunDir(folder).events.is_file():
            raise
        raise StateFileError(
            f"{unreadable}; `autopilot doctor --repair` rebuilds it from the run's event log",
        ) from None
    if as_json:
        say_json(report.to_json(), indent=2)
        return 0
    state, snap = report.state, report.snapshot
    lines = status_lines(
        state,
        StatusFacts(
            alive=report.alive,
            supervisor=report.supervisor,
            pending=report.pending_messages,
            users=report.pending_user_messages,
            elapsed_ms=elapsed_ms(state.to_json(), snap, now_ms),
            restored=snap.lastRestore,
            excerpt=snap.lastExcerpt,
            hook=report.hook,
        ),
        now_ms,
    )
    say("\n".join(lines))
    return 0


def status_lines(state: State, facts: StatusFacts, now_ms: int) -> list[str]:
    """The lines of ``autopilot status`` for a run's state and ``facts``."""
    from autopilot.view.plain import fmt_duration, format_moment

    spend = state.spend
    maximum = state.max_iterations or "∞"
    directory = state.cwd or "unknown (written by another implementation)"
    status = status_text(state, now_ms)
    if facts.alive is False and not state.terminated:
        status = f"driver gone — was {status}"  # what state.json says, until a relaunch
    lines = [
        f"run        {_field(state.run_id)}",
        f"status     {status}",
        f"agent      {_field(state.agent)}" + (f" ({_field(state.model)})" if state.model else ""),
        f"iteration  {state.iteration} of {maximum} ({spend.iterations} spent)",
        f"elapsed    {fmt_duration(facts.elapsed_ms)}",
        f"tokens     {spend.tokens.input} in / {spend.tokens.output} out",
        *_driver_lines(state, facts, now_ms),
        f"directory  {_field(directory)}",
    ]
    worktree = worktree_of(state)
    if worktree is not None:
        lines.append(f"worktree   {_field(worktree['path'])}")
        lines.append(f"branch     {_field(worktree['branch'])} (from {_field(worktree['origin'])})")
    if "parallel" in state.extra:  # where ``lane_views`` finds a parallel run's lanes
        from autopilot.store.lanes import lane_views
        from autopilot.store.run_state import RunState

        if isinstance(state, RunState):  # ``cli.status_light`` leaves these to the typed path
            root = runs_root(create=False)
            lines.extend(shown(view.line()) for view in lane_views(root, state))
    if state.supervisor_pid or facts.supervisor is not None:
        supervisor = {True: "alive", False: "gone", None: "none"}[facts.supervisor]
        if facts.supervisor is False and facts.alive is True and not state.terminated:
            supervisor += (
                f"; nothing restarts its daemon if it crashes: autopilot start {state.run_id} "
                "adopts it"
            )
        lines.insert(-1, f"supervisor {supervisor} (pid {state.supervisor_pid})")
    orphan = orphan_agent_line(state, facts.alive)
    if orphan is not None:
        lines.insert(-1, orphan)
    if not state.terminated and state.agent_env is not None:
        lines.append(f"env        {env_text(state)}")
    messages = messages_text(facts.users, facts.pending, state)
    if messages:
        lines.append(f"messages   {messages}")
    lines.extend(blocked_lines(state))
    if state.termination_note:
        lines.append(f"note       {_field(' '.join(state.termination_note.split()))}")
    restored = facts.restored
    if restored is not None:
        when = format_moment(restored["ts"], day_of_ms=now_ms)
        count = restored["filesChanged"]
        files = "" if count is None else f" ({count} file{'' if count == 1 else 's'})"
        lines.append(
            f"restored   {_field(restored['checkpoint'])} at {when}{files}; undo: "
            f"autopilot restore {state.run_id} --checkpoint "
            f"{_field(restored['safetyCheckpoint'])}"
        )
    if facts.excerpt:
        lines.append(f"last       {' '.join(facts.excerpt.split())[:200]}")
    return lines
