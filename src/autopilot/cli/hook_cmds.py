"""``autopilot hook install|uninstall|claude-stop|codex-stop`` (docs/hooks.md)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from autopilot.cli.echo import say
from autopilot.hook.inputs import HookAgent
from autopilot.hook.settings import Change, Scope, default_program, install, uninstall

_CTX = {"help_option_names": ["-h", "--help"]}
_AGENT = click.option(
    "--agent",
    type=click.Choice([a.value for a in HookAgent]),
    default=HookAgent.CLAUDE.value,
    show_default=True,
    help="The CLI whose settings get the hook.",
)
_SCOPE = click.option(
    "--scope",
    type=click.Choice([s.value for s in Scope]),
    default=Scope.PROJECT.value,
    show_default=True,
    help="This project's settings, or the user's (every session).",
)


@click.group(context_settings=_CTX)
def hook() -> None:
    """Stop-hook mode: keep an interactive Claude Code or Codex session going."""


def _report(changes: list[Change], done: str, unchanged: str) -> None:
    for change in changes:
        if not change.changed:
            say(f"{unchanged}: {change.path}")
        elif change.backup is not None:
            say(f"{done}: {change.path} (previous version in {change.backup})")
        else:
            say(f"{done}: {change.path}")


@hook.command("install", context_settings=_CTX)
@_AGENT
@_SCOPE
def install_cmd(agent: str, scope: str) -> None:
    """Add autopilot's Stop hook to the CLI's settings (others' settings kept).

    Installing is not arming: with nothing armed for a session, the hook lets it stop
    at once. Claude Code also gets the /autopilot slash command, which arms a run.
    """
    program = default_program(sys.argv[0], sys.executable)
    changes = install(HookAgent(agent), Scope(scope), Path.cwd(), program, dict(os.environ))
    _report(changes, "installed", "already installed")


@hook.command("uninstall", context_settings=_CTX)
@_AGENT
@_SCOPE
def uninstall_cmd(agent: str, scope: str) -> None:
    """Remove autopilot's Stop hook (and /autopilot) from the CLI's settings, nothing else."""
    changes = uninstall(HookAgent(agent), Scope(scope), Path.cwd(), dict(os.environ))
    _report(changes, "removed", "nothing of autopilot's in")


def _stop_command(agent: HookAgent) -> click.Command:
    @click.command(f"{agent.value}-stop", context_settings=_CTX)
    def stop_hook() -> int:
        from autopilot.hook.stop import main

        return main(agent)

    stop_hook.help = (
        f"The Stop hook {agent.value} calls: reads its JSON on stdin, answers on stdout. "
        "Takes no arguments; installed by autopilot hook install."
    )
    return stop_hook


hook.add_command(_stop_command(HookAgent.CLAUDE))
hook.add_command(_stop_command(HookAgent.CODEX))
