"""``autopilot report``: the agent's decision about its running work item.

The agent runs it through its shell tool inside an iteration; it finds its run from
``AUTOPILOT_RUN_ID`` (set in every agent's environment), ``--run``, or in hook mode
the run armed for the session it runs inside (``CLAUDE_CODE_SESSION_ID``,
``CODEX_THREAD_ID``). The report is
cut to the sizes an item record holds (``core.item_bounds``; a cut leaves a marker),
checked at once against the backlog, and anything wrong is printed with how to fix
it (exit 2), so the agent can correct itself in the same turn. An accepted report
waits in the run's folder for the driver, which applies it when the iteration ends.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import click

from autopilot.cli.echo import say
from autopilot.core.item_bounds import bound_report
from autopilot.core.item_report import ItemDecision, ItemReport, validate_report
from autopilot.errors import UsageError
from autopilot.store.backlog import Backlog
from autopilot.store.paths import resolve_run, run_dir, runs_root
from autopilot.store.reports import write_report
from autopilot.store.rundir import RunDir
from autopilot.store.state import read_state
from autopilot.workspace.worktrees import RunWorktree, project_home

RUN_ID_ENV = "AUTOPILOT_RUN_ID"
ITERATION_ENV = "AUTOPILOT_ITERATION"
_DECISIONS = ", ".join(d.value for d in ItemDecision)


def _cut(given: ItemReport, claimed: ItemReport) -> bool:
    """Whether ``bound_report`` left out or shortened any of the evidence (a byte that
    is not UTF-8 made U+FFFD is not a cut)."""
    if len(claimed.evidence) != len(given.evidence):
        return True
    return any(len(c) < len(g) for c, g in zip(claimed.evidence, given.evidence, strict=True))


def _criteria(given: tuple[str, ...]) -> dict[str, bool]:
    criteria: dict[str, bool] = {}
    for text in given:
        criterion_id, sep, verdict = text.partition("=")
        verdict = verdict.strip().lower()
        if not sep or not criterion_id.strip() or verdict not in ("pass", "fail"):
            raise UsageError(
                f"--criterion takes ID=pass or ID=fail (e.g. --criterion ac1=pass), got {text!r}"
            )
        criteria[criterion_id.strip()] = verdict == "pass"
    return criteria


def _hook_run(root: Path) -> str | None:
    """The run armed for the agent session this runs inside (hook mode), if any."""
    from autopilot.hook.arm import session_from_env
    from autopilot.store.hook_registry import load_armings

    inside = session_from_env(os.environ)
    if inside is None:
        return None
    agent, session = inside
    armings, _ = load_armings(root)
    return next((a.run_id for a in armings if a.session_id == session and a.agent is agent), None)


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("decision", metavar="DECISION")
@click.option("--item", "item_id", required=True, metavar="ID", help="The running work item.")
@click.option(
    "--criterion",
    "criteria",
    multiple=True,
    metavar="ID=pass|fail",
    help="A criterion's result (repeat for each).",
)
@click.option("--evidence", multiple=True, metavar="TEXT", help="What shows it (repeat for each).")
@click.option("--run", "run_ref", metavar="RUN", help=f"The run (default ${RUN_ID_ENV}).")
def report(
    decision: str,
    item_id: str,
    criteria: tuple[str, ...],
    evidence: tuple[str, ...],
    run_ref: str | None,
) -> None:
    """Report the decision about the running work item (for the agent).

    DECISION is one of continue_next, retry_same_unit, reopen_micro, reopen_meso,
    reopen_macro, ask_user_meta, stop.
    """
    try:
        chosen = ItemDecision(decision)
    except ValueError:
        raise UsageError(f"DECISION must be one of {_DECISIONS}; got {decision!r}") from None
    root = runs_root(create=False)
    ref = run_ref or os.environ.get(RUN_ID_ENV, "").strip() or _hook_run(root)
    if ref is None:
        raise UsageError(
            f"autopilot report is for an agent inside a run: ${RUN_ID_ENV} is not set, "
            "this is no session with a run armed (autopilot arm), and no --run RUN was given"
        )
    run_id = resolve_run(root, ref)
    folder = run_dir(root, run_id)
    state = read_state(RunDir(folder).state)
    if state.terminated:
        raise UsageError(f"run {run_id} has ended ({state.termination_reason})")
    worktree = RunWorktree.from_json(state.extra.get("worktree"))
    project = project_home(Path(state.cwd or "."), worktree)
    items = Backlog(project, root / ".locks").read().items
    given = ItemReport(item_id, chosen, _criteria(criteria), tuple(evidence))
    claimed = bound_report(given)
    problems = validate_report(items, claimed)
    if problems:
        raise UsageError("report not recorded: " + "; ".join(problems))
    iteration_text = os.environ.get(ITERATION_ENV, "")
    iteration = int(iteration_text) if iteration_text.isdigit() else None
    write_report(folder, claimed, ts_ms=int(time.time() * 1000), iteration=iteration)
    what = {
        ItemDecision.CONTINUE_NEXT: "autopilot runs the criteria's checks when this "
        "iteration ends; the item is completed only if they pass",
        ItemDecision.ASK_USER_META: "the run waits for the user's answer after this iteration",
        ItemDecision.STOP: "the run stops when this iteration ends",
    }.get(chosen, "it is applied when this iteration ends")
    cut = " (its --evidence was cut to fit the item's record)" if _cut(given, claimed) else ""
    say(f"autopilot: recorded {chosen.value} for {item_id}{cut}: {what}")
