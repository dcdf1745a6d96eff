"""``autopilot pause | resume | stop | status [RUN]``."""

from __future__ import annotations

import json
import time
from pathlib import Path

import click

from autopilot import control
from autopilot.loop.arming import describe_ending
from autopilot.loop.clock import SystemClock
from autopilot.store.paths import resolve_run, run_dir, runs_root
from autopilot.view.present import elapsed_ms, fmt_duration


def ending_of(state: dict[str, object]) -> str:
    """``describe_ending`` for a terminated run's state."""
    reason = state.get("terminationReason")
    return describe_ending(
        reason if isinstance(reason, str) else None, completed=state.get("status") == "completed"
    )


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
    click.echo(control.pause(_run_dir(run_ref), SystemClock()).message)
    return 0


@click.command(context_settings=_CTX)
@_RUN_ARG
def resume(run_ref: str | None) -> int:
    """Resume a paused RUN."""
    click.echo(control.resume(_run_dir(run_ref), SystemClock()).message)
    return 0


@click.command(context_settings=_CTX)
@click.option("--now", is_flag=True, help="End the running agent now instead of at the boundary.")
@_RUN_ARG
def stop(now: bool, run_ref: str | None) -> int:
    """Stop RUN at its next iteration boundary (or now, with --now)."""
    click.echo(control.stop(_run_dir(run_ref), SystemClock(), now=now).message)
    return 0


@click.command(context_settings=_CTX)
@click.option("--json", "as_json", is_flag=True, help="Print state, snapshot and liveness as JSON.")
@_RUN_ARG
def status(as_json: bool, run_ref: str | None) -> int:
    """Show RUN's state: status, iteration, spend, last response, driver liveness."""
    report = control.status(_run_dir(run_ref))
    if as_json:
        click.echo(json.dumps(report.to_json(), indent=2, ensure_ascii=False))
        return 0
    state, snap = report.state, report.snapshot
    spend = state.get("spend") or {}
    tokens = spend.get("tokens") or {}
    maximum = state.get("max") or "∞"
    alive = {True: "alive", False: "gone", None: "none"}[report.alive]
    status_text = state.get("status")
    if state.get("paused") and not state.get("terminated"):
        status_text = f"{status_text} (pause requested)" if status_text != "paused" else "paused"
    lines = [
        f"run        {state.get('runId')}",
        f"status     {status_text}" + (f" — {ending_of(state)}" if state.get("terminated") else ""),
        f"agent      {state.get('agent')}"
        + (f" ({state.get('model')})" if state.get("model") else ""),
        f"iteration  {state.get('iter')} of {maximum} ({spend.get('iterations', 0)} spent)",
        f"elapsed    {fmt_duration(elapsed_ms(state, snap, int(time.time() * 1000)))}",
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
        f"directory  {state.get('cwd')}",
    ]
    if state.get("terminationNote"):
        lines.append(f"note       {state.get('terminationNote')}")
    if snap.lastExcerpt:
        lines.append(f"last       {' '.join(snap.lastExcerpt.split())[:200]}")
    click.echo("\n".join(lines))
    return 0
