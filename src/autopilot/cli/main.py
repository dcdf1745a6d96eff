"""The ``autopilot`` command line: parse, call the library, print.

Exit codes (stable, documented in the README):
0 complete / success, 1 failed or aborted, 2 usage error, 3 a limit was reached,
4 environment problem (runs root, state file, missing agent), 130 interrupted.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

import click

from autopilot import __version__
from autopilot.cli import control_cmds, manage_cmds, run_cmds, view_cmds, watch_cmds
from autopilot.errors import AutopilotError

CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


@click.group(context_settings=CONTEXT_SETTINGS, invoke_without_command=True)
@click.version_option(
    __version__, "--version", prog_name="autopilot", message="%(prog)s %(version)s"
)
@click.pass_context
def cli(ctx: click.Context) -> None:
    """Run coding agents unattended, with durable state and honest stopping."""
    if ctx.invoked_subcommand is None:
        ctx.exit(run_cmds.relaunch_active_run())


for command in (
    run_cmds.run,
    run_cmds.start,
    run_cmds.demo,
    control_cmds.pause,
    control_cmds.resume,
    control_cmds.stop,
    control_cmds.status,
    view_cmds.list_runs,
    view_cmds.replay,
    view_cmds.where,
    watch_cmds.watch,
    manage_cmds.stats,
    manage_cmds.prune,
    manage_cmds.doctor,
):
    cli.add_command(command)


def _split_extra(argv: list[str]) -> tuple[list[str], tuple[str, ...]]:
    """Split ``run … -- PROGRAM ARGS`` at the first ``--``."""
    if "--" in argv:
        at = argv.index("--")
        return argv[:at], tuple(argv[at + 1 :])
    return argv, ()


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point of the ``autopilot`` console script; exits with the code."""
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
        where = (
            f" (see autopilot {error.ctx.info_name} --help)"
            if error.ctx and error.ctx.parent
            else ""
        )
        click.echo(f"autopilot: error: {error.format_message()}{where}", err=True)
        code = 2
    except click.exceptions.Exit as done:
        code = done.exit_code
    except click.Abort:
        click.echo("autopilot: interrupted", err=True)
        code = 130
    except click.ClickException as error:
        click.echo(f"autopilot: error: {error.format_message()}", err=True)
        code = error.exit_code
    except AutopilotError as error:
        click.echo(f"autopilot: error: {error}", err=True)
        code = error.exit_code
    except BrokenPipeError:
        code = 0
    sys.exit(code if isinstance(code, int) else 0)
