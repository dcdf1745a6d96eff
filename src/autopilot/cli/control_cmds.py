"""``autopilot pause | resume | stop | status [RUN]`` (bodies in ``cli.control_light``
and ``cli.control_body``)."""

from __future__ import annotations

import click

from autopilot.cli import control_body, control_light

_RUN_ARG = click.argument("run_ref", metavar="[RUN]", required=False)
_CTX = {"help_option_names": ["-h", "--help"]}


@click.command(context_settings=_CTX)
@_RUN_ARG
def pause(run_ref: str | None) -> int:
    """Pause RUN at its next iteration boundary (the agent is not interrupted)."""
    return control_light.pause(run_ref)


@click.command(context_settings=_CTX)
@_RUN_ARG
def resume(run_ref: str | None) -> int:
    """Resume a paused RUN."""
    return control_light.resume(run_ref)


@click.command(context_settings=_CTX)
@click.option("--now", is_flag=True, help="End the running agent now instead of at the boundary.")
@_RUN_ARG
def stop(now: bool, run_ref: str | None) -> int:
    """Stop RUN at its next iteration boundary (or now, with --now)."""
    return control_light.stop(now, run_ref)


@click.command(context_settings=_CTX)
@click.option("--json", "as_json", is_flag=True, help="Print state, snapshot and liveness as JSON.")
@_RUN_ARG
def status(as_json: bool, run_ref: str | None) -> int:
    """Show RUN's state: status, iteration, spend, last response, driver liveness."""
    return control_body.status(as_json, run_ref)
