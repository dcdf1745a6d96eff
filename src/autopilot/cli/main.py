"""The ``autopilot`` command line: parse, call the library, print.

Exit codes (stable, documented in the README):
0 complete / success, 1 failed or aborted, 2 usage error, 3 a limit was reached,
4 environment problem (runs root, state file, missing agent), 130 interrupted.

Whatever goes wrong ends as one line on stderr, never a traceback: an ``OSError``
that escapes a command (a full disk) is ``autopilot: error: <strerror>: <file>``
with exit 4; any other unexpected exception is ``autopilot: internal error: …``
with exit 1, and ``AUTOPILOT_DEBUG=1`` shows its traceback instead.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence

import click

from autopilot import __version__
from autopilot.cli.failures import error_line, exit_code_for
from autopilot.store.bulk import CollectorOff

CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


_COMMANDS: dict[str, tuple[str, str]] = {
    "run": ("run_cmds", "run"),
    "start": ("start_cmds", "start"),
    "relaunch": ("start_cmds", "relaunch"),
    "demo": ("run_cmds", "demo"),
    "pause": ("control_cmds", "pause"),
    "resume": ("control_cmds", "resume"),
    "stop": ("control_cmds", "stop"),
    "status": ("control_cmds", "status"),
    "send": ("message_cmds", "send"),
    "off": ("message_cmds", "off"),
    "on": ("message_cmds", "on"),
    "memory": ("message_cmds", "memory"),
    "service": ("service_cmds", "service"),
    "list": ("view_cmds", "list_runs"),
    "replay": ("view_cmds", "replay"),
    "where": ("view_cmds", "where"),
    "watch": ("watch_cmds", "watch"),
    "stats": ("manage_cmds", "stats"),
    "prune": ("manage_cmds", "prune"),
    "doctor": ("manage_cmds", "doctor"),
    "checkpoints": ("git_cmds", "checkpoints"),
    "diff": ("git_cmds", "diff"),
    "restore": ("git_cmds", "restore"),
    "merge": ("merge_cmd", "merge"),
    "tasks": ("tasks_cmds", "tasks"),
    "answer": ("gate_cmds", "answer"),
    "approve": ("gate_cmds", "approve"),
    "report": ("report_cmd", "report"),
    "hook": ("hook_cmds", "hook"),
    "arm": ("hook_cmds", "arm"),
}
"""Each command's name → (module in ``autopilot.cli``, attribute). A command's module
is imported only when that command runs (or ``--help`` lists them all), so
``autopilot status`` never pays for the driver, the adapters or the live view."""


class _LazyGroup(click.Group):
    """A click group whose commands are imported on first use (``_COMMANDS``)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*_COMMANDS, *self.commands})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        command = self.commands.get(cmd_name)
        if command is None and cmd_name in _COMMANDS:
            module_name, attribute = _COMMANDS[cmd_name]
            with CollectorOff(freeze=True):  # what loads lives as long as the process
                module = importlib.import_module(f"autopilot.cli.{module_name}")
            command = getattr(module, attribute)
            self.add_command(command, cmd_name)
        return command


@click.group(cls=_LazyGroup, context_settings=CONTEXT_SETTINGS, invoke_without_command=True)
@click.version_option(
    __version__, "--version", prog_name="autopilot", message="%(prog)s %(version)s"
)
@click.pass_context
def cli(ctx: click.Context) -> None:
    """Run coding agents unattended, with durable state and honest stopping."""
    if ctx.invoked_subcommand is None:
        from autopilot.cli.start_cmds import relaunch_active_run

        ctx.exit(relaunch_active_run())


def _split_extra(argv: list[str]) -> tuple[list[str], tuple[str, ...]]:
    """Split ``run … -- PROGRAM ARGS`` at the first ``--`` (``run`` only; for other
    commands ``--`` keeps its usual meaning: what follows is positional)."""
    if "--" in argv and "run" in argv[: argv.index("--")]:
        at = argv.index("--")
        return argv[:at], tuple(argv[at + 1 :])
    return argv, ()


def _error(message: str) -> None:
    error_line(message)


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point of the ``autopilot`` console script; exits with the code.

    Raises:
        SystemExit: always, with the exit code.
        Exception: only with ``AUTOPILOT_DEBUG=1``, an unexpected one re-raised.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    args, extra = _split_extra(args)
    try:
        code = cli.main(
            args=args, prog_name="autopilot", standalone_mode=False, obj={"extra": extra}
        )
    except click.exceptions.NoArgsIsHelpError as error:
        click.echo(error.ctx.get_help() if error.ctx else str(error))
        code = 0
    except click.UsageError as error:
        where = f" (see {error.ctx.command_path} --help)" if error.ctx and error.ctx.parent else ""
        _error(f"autopilot: error: {error.format_message()}{where}")
        code = 2
    except click.exceptions.Exit as done:
        code = done.exit_code
    except click.Abort:
        _error("autopilot: interrupted")
        code = 130
    except click.ClickException as error:
        _error(f"autopilot: error: {error.format_message()}")
        code = error.exit_code
    except (KeyboardInterrupt, Exception) as error:
        code = exit_code_for(error)
    sys.exit(code if isinstance(code, int) else 0)
