"""``autopilot service install | uninstall | status``: relaunch active runs at login."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from autopilot.cli.echo import say
from autopilot.runtime import service as login_service

_CTX = {"help_option_names": ["-h", "--help"]}


def _plan() -> login_service.ServicePlan:
    return login_service.plan_service(sys.platform, Path.home(), os.environ)


@click.group(context_settings=_CTX)
def service() -> None:
    """A login service (systemd user unit or launchd agent) that relaunches runs left
    active, so a reboot does not need you."""


@service.command(context_settings=_CTX)
def install() -> int:
    """Write the service and register it to run `autopilot relaunch --all` at login."""
    plan = _plan()
    problems = login_service.install(plan)
    say(f"autopilot: wrote {plan.path}")
    say(f"autopilot: at login it runs: {' '.join(login_service.relaunch_command())}")
    for problem in problems:
        say(f"autopilot: warning: {problem}", err=True)
    if problems:
        say(
            "autopilot: the file is in place; register it yourself with: "
            + " && ".join(" ".join(argv) for argv in plan.enable),
            err=True,
        )
    return 0


@service.command(context_settings=_CTX)
def uninstall() -> int:
    """Unregister the service and remove its file."""
    plan = _plan()
    if login_service.uninstall(plan):
        say(f"autopilot: removed {plan.path}")
    else:
        say("autopilot: no service was installed")
    return 0


@service.command(context_settings=_CTX)
def status() -> int:
    """Say whether the service is installed and what the platform says of it."""
    plan = _plan()
    installed, said = login_service.status(plan)
    if installed:
        say(f"autopilot: installed ({plan.path}); {said}")
    else:
        say(f"autopilot: not installed (would be {plan.path})")
    return 0
