"""``autopilot stats``, ``prune`` and ``doctor``."""

from __future__ import annotations

import time

import click

from autopilot.cli import stats_body
from autopilot.cli.echo import say
from autopilot.config_values import parse_duration_seconds
from autopilot.errors import EnvironmentProblem, UsageError
from autopilot.manage.doctor import Level, run_doctor
from autopilot.manage.prune import apply_prune, plan_prune
from autopilot.store.paths import runs_root

_CTX = {"help_option_names": ["-h", "--help"]}


@click.command(context_settings=_CTX)
@click.option("--json", "as_json", is_flag=True, help="Print the totals as one JSON object.")
def stats(as_json: bool) -> int:
    """Totals over all runs: outcomes, labels, agents, iterations, tokens and cost."""
    return stats_body.stats(as_json)


def _megabytes(size: int) -> str:
    return f"{size / 1_000_000:.1f} MB"


@click.command(context_settings=_CTX)
@click.option(
    "--older-than",
    "older_than",
    metavar="AGE",
    help="Remove runs idle for longer than AGE, e.g. 30d, 12h, 90m (required).",
)
@click.option("--dry-run", is_flag=True, help="Show what would be removed; change nothing.")
@click.option(
    "--branches",
    is_flag=True,
    help="Also delete the autopilot/<run> branches of removed runs that are merged.",
)
def prune(older_than: str | None, dry_run: bool, branches: bool) -> int:
    """Remove old runs' folders, index rows, worktrees and checkpoint refs.

    Active runs, and runs whose worktree has uncommitted files, are never removed.
    """
    if older_than is None:
        # Removing runs' folders and logs always takes an age the user chose.
        example = "autopilot prune --older-than 30d" + (" --branches" if branches else "")
        raise UsageError(f"prune needs --older-than AGE: which runs are old, e.g. {example}")
    seconds = parse_duration_seconds(older_than, name="--older-than")
    root = runs_root(create=False)
    if not root.exists():
        say(f"autopilot: nothing to prune ({root} does not exist)")
        return 0
    plan = plan_prune(root, int(seconds * 1000), time.time_ns() // 1_000_000)
    for run_id, reason in plan.kept.items():
        say(f"kept     {run_id}  ({reason})")
    total = sum(plan.sizes.values())
    if dry_run:
        for run_id in plan.remove:
            say(f"would remove  {run_id}  ({_megabytes(plan.sizes[run_id])})")
        say(
            f"autopilot: dry run: {len(plan.remove)} runs older than {older_than} "
            f"({_megabytes(total)}) would be removed; nothing was changed"
        )
        return 0
    try:
        result = apply_prune(root, plan, branches=branches)
    except OSError as error:
        raise EnvironmentProblem(
            f"cannot rewrite {root / 'index.jsonl'}: {error.strerror or error}"
        ) from None
    for run_id in result.removed:
        say(f"removed  {run_id}  ({_megabytes(plan.sizes.get(run_id, 0))})")
        cleanup = result.git.get(run_id)
        for line in (cleanup.done + cleanup.kept) if cleanup else ():
            say(f"         {run_id}: {line}")
    for line in result.swept:
        say(line)
    for run_id, why in result.failed.items():
        say(f"failed   {run_id}  ({why})", err=True)
    freed = sum(plan.sizes.get(run_id, 0) for run_id in result.removed)
    say(
        f"autopilot: removed {len(result.removed)} runs ({_megabytes(freed)}); "
        f"{result.rows_dropped} index rows dropped"
    )
    return 1 if result.failed else 0


def _repair() -> None:
    from autopilot.loop.clock import SystemClock
    from autopilot.manage.repair import repair_runs
    from autopilot.store.run_state import REBUILT_MARK

    for done in repair_runs(runs_root(create=False), SystemClock()):
        if done.state.terminated:
            ending = "ended"
        elif done.state.extra.get(REBUILT_MARK):
            ending = "paused; its prompt is not recorded: end it with autopilot stop"
        else:
            ending = f"paused; go on with autopilot start {done.run_id}"
        kept = (
            f"the unreadable file is kept as {done.kept_as.name}"
            if done.kept_as
            else "it was missing"
        )
        say(f"autopilot: {done.run_id}: state.json rebuilt from its event log ({ending}); {kept}")


@click.command(context_settings=_CTX)
@click.option(
    "--repair",
    is_flag=True,
    help="Rebuild each state.json that cannot be read (and no driver holds) from its "
    "run's event log; the corrupt file is kept beside it.",
)
def doctor(repair: bool) -> int:
    """Check the runs root, agent CLIs, git, stale runs and the index (exit 1 on findings)."""
    if repair:
        _repair()
    findings = run_doctor()
    for finding in findings:
        say(f"{finding.level.value:<5} {finding.subject:<16} {finding.detail}")
    failures = sum(1 for finding in findings if finding.level is Level.FAIL)
    say(
        f"autopilot: {failures} finding{'s' if failures != 1 else ''}"
        if failures
        else "autopilot: healthy"
    )
    return 1 if failures else 0
