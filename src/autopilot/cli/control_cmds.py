"""``autopilot pause | resume | stop | status [RUN]``."""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import click

from autopilot import control
from autopilot.cli.echo import say, say_json
from autopilot.loop.arming import describe_ending
from autopilot.loop.clock import SystemClock
from autopilot.store.paths import resolve_run, run_dir, runs_root
from autopilot.store.project_files import off_path
from autopilot.store.state import read_state_quietly
from autopilot.view.plain import format_moment
from autopilot.view.present import elapsed_ms, fmt_duration
from autopilot.view.safe import shown


def ending_of(state: Mapping[str, object]) -> str:
    """``describe_ending`` for a terminated run's state."""
    reason = state.get("terminationReason")
    return describe_ending(
        reason if isinstance(reason, str) else None, completed=state.get("status") == "completed"
    )


def status_text(state: Mapping[str, Any], now_ms: int) -> str:
    """The run's status in words: how it ended, or its status with what is pending.

    ``completed (completion_promise)``, ``stopped by the user``; ``running (stop
    requested)``, ``running (pause requested)``, ``paused``, ``rate_limited until
    19:00:00``.
    """
    if state.get("terminated"):
        return ending_of(state)
    status = str(state.get("status") or "unknown")
    until = state.get("waitingUntil")
    if status in ("rate_limited", "waiting") and isinstance(until, int | float):
        status += f" until {format_moment(until, day_of_ms=now_ms)}"
    if state.get("stopRequested") or state.get("stopNow"):
        return status + (" (stop --now requested)" if state.get("stopNow") else " (stop requested)")
    if state.get("paused") and status != "paused":
        return status + " (pause requested)"
    return status


def _field(value: object) -> str:
    """One value of a status line, on one line whatever it holds."""
    return shown(str(value))


_RUN_ARG = click.argument("run_ref", metavar="[RUN]", required=False)
_CTX = {"help_option_names": ["-h", "--help"]}


def _run_dir(run_ref: str | None) -> Path:
    root = runs_root(create=False)
    run_id = resolve_run(root, run_ref, project=None if run_ref else Path.cwd().resolve())
    return run_dir(root, run_id)


@click.command(context_settings=_CTX)
@_RUN_ARG
def pause(run_ref: str | None) -> int:
    """Pause RUN at its next iteration boundary (the agent is not interrupted)."""
    say(control.pause(_run_dir(run_ref), SystemClock()).message)
    return 0


@click.command(context_settings=_CTX)
@_RUN_ARG
def resume(run_ref: str | None) -> int:
    """Resume a paused RUN."""
    folder = _run_dir(run_ref)
    before = read_state_quietly(folder / "state.json") or {}
    result = control.resume(folder, SystemClock())
    say(resume_message(folder.name, before, result.state))
    return 0


def resume_message(run_id: str, before: Mapping[str, Any], after: Mapping[str, Any]) -> str:
    """What ``resume`` did: resumed, nothing to resume, or held by the OFF file."""
    off = off_path(Path(str(after.get("cwd") or "")))
    held_by_off = bool(after.get("cwd")) and off.exists()
    if held_by_off and (before.get("status") == "paused" or before.get("paused")):
        return f"{run_id}: still paused by {off}; autopilot on (or remove that file) to resume"
    if not before.get("paused") and before.get("status") != "paused":
        return f"{run_id}: not paused; nothing to resume"
    return f"{run_id}: resumed"


@click.command(context_settings=_CTX)
@click.option("--now", is_flag=True, help="End the running agent now instead of at the boundary.")
@_RUN_ARG
def stop(now: bool, run_ref: str | None) -> int:
    """Stop RUN at its next iteration boundary (or now, with --now)."""
    say(control.stop(_run_dir(run_ref), SystemClock(), now=now).message)
    return 0


@click.command(context_settings=_CTX)
@click.option("--json", "as_json", is_flag=True, help="Print state, snapshot and liveness as JSON.")
@_RUN_ARG
def status(as_json: bool, run_ref: str | None) -> int:
    """Show RUN's state: status, iteration, spend, last response, driver liveness."""
    report = control.status(_run_dir(run_ref))
    if as_json:
        say_json(report.to_json(), indent=2)
        return 0
    state, snap = report.state, report.snapshot
    now_ms = int(time.time() * 1000)
    spend = state.get("spend") or {}
    tokens = spend.get("tokens") or {}
    maximum = state.get("max") or "∞"
    alive = {True: "alive", False: "gone", None: "none"}[report.alive]
    lines = [
        f"run        {_field(state.get('runId'))}",
        f"status     {status_text(state, now_ms)}",
        f"agent      {_field(state.get('agent'))}"
        + (f" ({_field(state.get('model'))})" if state.get("model") else ""),
        f"iteration  {state.get('iter')} of {maximum} ({spend.get('iterations', 0)} spent)",
        f"elapsed    {fmt_duration(elapsed_ms(state, snap, now_ms))}",
        f"tokens     {tokens.get('input', 0)} in / {tokens.get('output', 0)} out",
        f"cost       ${float(spend.get('costUsd') or 0):.4f}",
        f"driver     {alive}"
        + (f" (pid {state.get('pid')})" if state.get("pid") else "")
        + (
            f" — relaunch: autopilot start {state.get('runId')}; "
            f"end it: autopilot stop {state.get('runId')}"
            if report.alive is False and not state.get("terminated")
            else ""
        ),
        f"directory  {_field(state.get('cwd') or 'unknown (written by another implementation)')}",
    ]
    if state.get("supervisorPid") or report.supervisor is not None:
        supervisor = {True: "alive", False: "gone", None: "none"}[report.supervisor]
        lines.insert(-1, f"supervisor {supervisor} (pid {state.get('supervisorPid')})")
    if report.pending_messages:
        waiting = (
            "never delivered (the run ended first)"
            if state.get("terminated")
            else "waiting for the next iteration"
        )
        lines.append(f"messages   {report.pending_messages} {waiting}")
    if state.get("terminationNote"):
        lines.append(f"note       {_field(' '.join(str(state['terminationNote']).split()))}")
    if snap.lastExcerpt:
        lines.append(f"last       {' '.join(snap.lastExcerpt.split())[:200]}")
    say("\n".join(lines))
    return 0
