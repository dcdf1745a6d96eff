"""``autopilot watch [RUN] [--plain]``: the live view, or plain lines when not a terminal."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from autopilot.store.paths import resolve_run, run_dir, runs_root

_CTX = {"help_option_names": ["-h", "--help"]}


def _write_line(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


@click.command(context_settings=_CTX)
@click.option(
    "--plain",
    is_flag=True,
    help="One line per event, ending at the run's terminal event (the default when "
    "stdout is not a terminal).",
)
@click.argument("run_ref", metavar="[RUN]", required=False)
def watch(plain: bool, run_ref: str | None) -> int:
    """Watch RUN live (default: this project's newest run).

    Keys: p pause, r resume, s stop (asks first), m send a message to the agent, q
    leave. Leaving never stops the run.
    """
    root = runs_root(create=False)
    run_id = resolve_run(root, run_ref, project=None if run_ref else Path.cwd().resolve())
    folder = run_dir(root, run_id)
    if plain or not sys.stdout.isatty():
        from autopilot.view.follow import follow_plain

        try:
            return follow_plain(folder, _write_line)
        except KeyboardInterrupt:
            return 130
    from autopilot.loop.clock import SystemClock
    from autopilot.loop.messages import message_sender
    from autopilot.view.live import run_watch

    run_watch(folder, send_message=message_sender(folder, SystemClock()))
    return 0
