"""The budget and promise options of ``autopilot run``, and the lines that say a run's
limits when it starts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from autopilot.cli.echo import say
from autopilot.config import RunConfig

LIMIT_OPTIONS = (
    "max-iterations",
    "min-iterations",
    "max-cost",
    "max-tokens",
    "max-duration",
    "iteration-timeout",
    "idle-timeout",
    "result-grace",
    "check-timeout",
    "completion-promise",
    "abort-promise",
    "completion-match",
    "stagnation-limit",
    "max-item-attempts",
    "model",
    "label",
    "prompt-via",
)


def limit_options(func: Any) -> Any:
    helps = {
        "max-iterations": "Iteration budget (default 10; 0 = unlimited, explicitly).",
        "min-iterations": "Promises are not honoured before this many iterations.",
        "max-cost": "Cost budget in USD.",
        "max-tokens": "Token budget (input + output).",
        "max-duration": "Active time budget, e.g. 2h or 1h30m (paused time excluded).",
        "iteration-timeout": "Wall-clock limit per iteration, e.g. 45m (default 30m).",
        "idle-timeout": "Limit on an iteration's time without output, e.g. 5m (default 10m).",
        "result-grace": "Wait after the agent's final result before ending it (default 5s).",
        "check-timeout": "Limit per check or --verify command, e.g. 20m (default 10m).",
        "completion-promise": "Token that completes the run (default COMPLETE).",
        "abort-promise": "Token that aborts the run.",
        "completion-match": (
            "sentence (default: the token as a sentence of its own, or <promise>TOKEN</promise>), "
            "word (a whole word), tag (the tag only) or substring."
        ),
        "stagnation-limit": "Iterations without progress that halt the run (default 3; 0 = off).",
        "max-item-attempts": (
            "--backlog: attempts at one work item before it is blocked and the run moves "
            "on (default 3; 0 = no limit)."
        ),
        "model": "Model name passed to the agent.",
        "label": "Label for the run id (default: the directory name).",
        "prompt-via": "command agent: stdin (default), arg or file.",
    }
    for name in reversed(LIMIT_OPTIONS):
        option = click.option(
            f"--{name}", name.replace("-", "_"), metavar=_METAVARS[name], help=helps[name]
        )
        func = option(func)
    return func


_METAVARS = {
    "max-iterations": "N",
    "min-iterations": "N",
    "max-cost": "USD",
    "max-tokens": "N",
    "max-duration": "DURATION",
    "iteration-timeout": "DURATION",
    "idle-timeout": "DURATION",
    "result-grace": "DURATION",
    "check-timeout": "DURATION",
    "completion-promise": "TOKEN",
    "abort-promise": "TOKEN",
    "completion-match": "sentence|word|tag|substring",
    "stagnation-limit": "N",
    "max-item-attempts": "N",
    "model": "MODEL",
    "label": "LABEL",
    "prompt-via": "stdin|arg|file",
}
"""What each option takes, as the README's table names it."""


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "none"
    if seconds >= 3600:
        return f"{seconds / 3600:g}h"
    return f"{seconds / 60:g}m" if seconds >= 60 else f"{seconds:g}s"


def print_limits(run_id: str, config: RunConfig, folder: Path, *, backlog: bool = False) -> None:
    """Say the run's limits at its start (a backlog run's also its work items': the
    attempts each may use and the timeout of each check)."""
    maximum = str(config.max_iterations) if config.max_iterations else "unlimited"
    model = f", model {config.model}" if config.model else ""
    cost = f"${config.max_cost_usd:g}" if config.max_cost_usd is not None else "none"
    abort = f", abort promise {config.abort_promise}" if config.abort_promise else ""
    say(f"autopilot: run {run_id} (agent {config.agent}{model})")
    say(
        f"autopilot: limits: iterations {config.min_iterations}..{maximum}, cost {cost}, "
        f"tokens {config.max_tokens or 'none'}, "
        f"duration {_duration(config.max_duration_seconds)}, "
        f"iteration timeout {_duration(config.iteration_timeout_seconds)}, "
        f"idle timeout {_duration(config.idle_timeout_seconds)}"
    )
    say(
        f"autopilot: completion promise {config.completion_promise} "
        f"({config.completion_match}){abort}, "
        f"stagnation limit {config.stagnation_limit or 'off'}, context {config.context}"
    )
    attempts = config.max_item_attempts or "unlimited"
    if backlog:
        say(
            f"autopilot: work items: {attempts} attempts each (max-item-attempts), check "
            f"timeout {_duration(config.check_timeout_seconds)} (check-timeout)"
        )
    elif config.verify:
        say(f"autopilot: check timeout {_duration(config.check_timeout_seconds)} (check-timeout)")
    if config.env_exclude:
        say(
            "autopilot: agent environment without "
            f"{', '.join(config.env_exclude)} (except what the agent's CLI needs)"
        )
    if config.notify:
        from autopilot.loop.notify import redact

        say(f"autopilot: notify {', '.join(redact(url) for url in config.notify)}")
    if config.checkpoints == "off":
        say("autopilot: checkpoints off")
    if config.verify:
        say(f"autopilot: a completion promise counts once these pass: {'; '.join(config.verify)}")
    say(f"autopilot: files in {folder}")
    if not config.max_iterations:
        say(
            "autopilot: warning: no iteration limit (--max-iterations 0): the run stops only "
            "by promise, stagnation, budget or stop",
            err=True,
        )
