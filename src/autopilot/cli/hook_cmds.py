"""``autopilot hook install|uninstall|claude-stop|codex-stop`` and ``autopilot arm``
(docs/hooks.md)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import click

from autopilot.cli.echo import say
from autopilot.core.vocabulary import HookAgent
from autopilot.errors import UsageError
from autopilot.hook.settings import (
    Change,
    Scope,
    default_program,
    hook_installed,
    install,
    uninstall,
)

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


def _report(changes: list[Change], done: str, unchanged: str, kept_file: str | None = None) -> None:
    """One line a file changed; ``kept_file`` words a file that stays with only
    autopilot's entries taken out (``uninstall``)."""
    for change in changes:
        if not change.changed:
            say(f"{unchanged}: {change.path}")
        else:
            what = kept_file if kept_file and change.path.exists() else done
            kept = f" (previous version in {change.backup})" if change.backup else ""
            say(f"{what}: {change.path}{kept}")


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
    _report(changes, "removed", "nothing of autopilot's in", "removed autopilot's entries from")


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


_ARM_LIMITS = (
    ("max-iterations", "N", "Iteration budget: stops of the session (default 10; 0 = unlimited)."),
    ("min-iterations", "N", "Promises are not honoured before this many iterations."),
    ("max-cost", "USD", "Cost budget in USD."),
    ("max-tokens", "N", "Token budget (input + output), from the session's transcript."),
    ("max-duration", "DURATION", "Active time budget, e.g. 2h."),
    ("completion-promise", "TOKEN", "Token that completes the run (default COMPLETE)."),
    ("abort-promise", "TOKEN", "Token that aborts the run."),
    ("completion-match", "sentence|word|tag|substring", "How the promise is matched."),
    ("stagnation-limit", "N", "Iterations without progress that halt the run (0 = off)."),
    (
        "max-item-attempts",
        "N",
        "--backlog: attempts at one work item before it is blocked and the run moves on "
        "(default 3; 0 = no limit).",
    ),
    ("label", "LABEL", "Label for the run id (default: the directory name)."),
)


def _arm_options(func: Any) -> Any:
    for name, metavar, text in reversed(_ARM_LIMITS):
        func = click.option(f"--{name}", name.replace("-", "_"), metavar=metavar, help=text)(func)
    return func


def _check_backlog(cwd: Path) -> None:
    from autopilot.core.ready_queue import open_items
    from autopilot.store.backlog import Backlog
    from autopilot.store.paths import runs_root

    locks = runs_root() / ".locks"
    locks.mkdir(mode=0o700, exist_ok=True)
    backlog = Backlog(cwd, locks).read()
    if not backlog.exists:
        raise UsageError(
            "--backlog needs .autopilot/tasks.jsonl in this directory (autopilot tasks add)"
        )
    held = backlog.hold()
    if held:
        raise UsageError(f"--backlog: fix it first: {held[0]}")
    if not open_items(backlog.items):
        raise UsageError("--backlog: .autopilot/tasks.jsonl has no open work item")


@click.command(context_settings=_CTX)
@click.option(
    "-p", "--prompt", "prompt_text", metavar="TEXT", help="The prompt of every iteration."
)
@click.option(
    "-f", "--prompt-file", "prompt_file", metavar="FILE", help="Read the prompt from FILE."
)
@click.option(
    "--backlog",
    is_flag=True,
    help="Work through .autopilot/tasks.jsonl: each iteration gets the next ready work item.",
)
@click.option(
    "--agent",
    type=click.Choice([a.value for a in HookAgent]),
    help="The CLI whose session is continued (default: the one this runs inside, else claude).",
)
@click.option(
    "--session",
    "session_id",
    metavar="ID",
    help="The session to continue (default: the one this runs inside, else the first "
    "session of the agent that stops in this project within --claim-window).",
)
@click.option(
    "--claim-window",
    "claim_window",
    metavar="DURATION",
    help="Without a session: how long the first session that stops may claim the run, "
    "e.g. 10m (default 5m); unclaimed by then, the run ends (unclaimed).",
)
@_arm_options
def arm(
    prompt_text: str | None,
    prompt_file: str | None,
    backlog: bool,
    agent: str | None,
    session_id: str | None,
    claim_window: str | None,
    **limits: str | None,
) -> None:
    """Arm a run that a Claude Code or Codex session's Stop hook continues.

    Each time the session stops, the run's step decides: the session goes on with the
    prompt again (an iteration) or stops (promise, budget, stagnation, autopilot stop,
    pause or .autopilot/OFF). Needs autopilot hook install.
    """
    from autopilot.cli.run_sources import prompt_source
    from autopilot.config_sources import build_config
    from autopilot.config_values import parse_duration_seconds
    from autopilot.hook.arm import (
        CLAIM_WINDOW_SECONDS,
        COST_UNKNOWN_NOTE,
        arm_hook_run,
        session_from_env,
    )
    from autopilot.loop.clock import SystemClock
    from autopilot.store.paths import runs_root
    from autopilot.store.run_state import PromptSource
    from autopilot.view.present import fmt_duration

    cwd = Path.cwd().resolve()
    if [prompt_text is not None, prompt_file is not None, backlog].count(True) != 1:
        raise UsageError("give exactly one of -p TEXT, -f FILE or --backlog")
    if backlog:
        source = PromptSource()
        _check_backlog(cwd)
    else:
        source = prompt_source(cwd, prompt_text=prompt_text, prompt_file=prompt_file)
    inside = session_from_env(os.environ)
    chosen = HookAgent(agent) if agent else (inside[0] if inside else HookAgent.CLAUDE)
    if session_id is not None and not session_id.strip():
        raise UsageError("--session needs a session id")
    if session_id is None and inside is not None and inside[0] is chosen:
        session_id = inside[1]
    window_seconds = float(CLAIM_WINDOW_SECONDS)
    if claim_window is not None:
        window_seconds = parse_duration_seconds(claim_window, name="--claim-window")
    flags = {name: limits.get(name.replace("-", "_")) for name, _, _ in _ARM_LIMITS}
    flags["agent"] = chosen.value
    config = build_config(flags, project=cwd)
    armed = arm_hook_run(
        runs_root(),
        config,
        source,
        cwd,
        chosen,
        session_id,
        SystemClock(),
        backlog=backlog,
        claim_window_seconds=window_seconds,
    )
    if not hook_installed(chosen, cwd, dict(os.environ)):
        scope = "" if chosen is HookAgent.CLAUDE else f" --agent {chosen.value}"
        say(
            f"autopilot: warning: no autopilot Stop hook is installed for {chosen.value} "
            f"here or for your user, so no session continues this run: "
            f"autopilot hook install{scope} (--scope user for every project)",
            err=True,
        )
    for expired in armed.expired:
        say(f"autopilot: run {expired.run_id} ended unclaimed: {expired.note}")
    if armed.arming.session_id:
        whose = f"{chosen.value} session {armed.arming.session_id}"
    else:
        within = fmt_duration(round(window_seconds * 1000))
        whose = (
            f"the first {chosen.value} session that stops in {cwd} within {within} "
            "(unclaimed by then, the run ends)"
        )
    say(
        f"autopilot: armed run {armed.run_id} for {whose}: each stop is an iteration "
        f"(autopilot status {armed.run_id}; autopilot stop {armed.run_id} ends it)"
    )
    if config.max_cost_usd is not None:
        say(f"autopilot: warning: {COST_UNKNOWN_NOTE}", err=True)
