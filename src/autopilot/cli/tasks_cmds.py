"""``autopilot tasks``: the project's work items (``.autopilot/tasks.jsonl``)."""

from __future__ import annotations

from pathlib import Path

import click

from autopilot.cli.echo import say, say_json
from autopilot.cli.tasks_common import (
    change_item,
    checked_item,
    find_item,
    parse_criteria,
    project_backlog,
    project_here,
    read_backlog,
)
from autopilot.cli.tasks_edit import edit, remove
from autopilot.cli.tasks_view import item_details, item_rows
from autopilot.core.decisions import fresh_attempts
from autopilot.core.ready_queue import backlog_problems
from autopilot.core.structs import replace
from autopilot.core.workitems import (
    CompletionState,
    FocusLayer,
    ItemFormatError,
    ItemStatus,
    WorkItem,
    check_id,
)
from autopilot.errors import BacklogError, UsageError
from autopilot.store.backlog import BacklogFile, read_bounded_regular_file
from autopilot.store.backlog_import import Imported, free_id, parse_import, unchecked

_HELP = {"help_option_names": ["-h", "--help"]}
MAX_IMPORT_BYTES = 8 * 1024 * 1024


@click.group(context_settings=_HELP)
def tasks() -> None:
    """The project's work items (.autopilot/tasks.jsonl), drained by run --backlog."""


@tasks.command(context_settings=_HELP)
@click.argument("prompt")
@click.option("--id", "item_id", metavar="ID", help="The item's id (default task-N).")
@click.option("--title", metavar="TEXT", help="A short name for lists.")
@click.option(
    "--criterion",
    "criteria",
    multiple=True,
    metavar="TEXT[ :: CHECK]",
    help="An acceptance criterion; after ' :: ' a shell command that verifies it.",
)
@click.option("--depends-on", "depends_on", multiple=True, metavar="ID", help="Do ID first.")
@click.option("--surface", "surface", multiple=True, metavar="PATH", help="A path it may change.")
@click.option(
    "--focus-layer",
    type=click.Choice([f.value for f in FocusLayer]),
    default="micro",
    help="How wide the work is (default micro).",
)
def add(
    prompt: str,
    item_id: str | None,
    title: str | None,
    criteria: tuple[str, ...],
    depends_on: tuple[str, ...],
    surface: tuple[str, ...],
    focus_layer: str,
) -> None:
    """Add a work item at the end of the backlog."""
    if not prompt.strip():
        raise UsageError("the prompt is empty")
    try:
        if item_id is not None:
            check_id(item_id, "--id")
        for dep in depends_on:
            check_id(dep, "--depends-on")
    except ItemFormatError as error:
        raise UsageError(str(error)) from None
    built = parse_criteria(criteria)
    added: list[WorkItem] = []

    def change(current: BacklogFile) -> BacklogFile:
        ids = [i.id for i in current.items]
        new_id = item_id or free_id(ids)
        if new_id in ids:
            raise BacklogError(
                f"work item {new_id!r} already exists (autopilot tasks show {new_id})"
            )
        missing = [dep for dep in depends_on if dep not in ids]
        if missing:
            raise BacklogError(f"--depends-on names no work item: {', '.join(missing)}")
        item = WorkItem(
            id=new_id,
            title=title,
            prompt=prompt,
            depends_on=depends_on,
            acceptance_criteria=built,
            allowed_surface=surface,
            focus_layer=FocusLayer(focus_layer),
        )
        item = checked_item(item)
        added.append(item)
        return current.append([item])

    project_backlog().update(change)
    say(f"autopilot: added {added[0].id}")


@tasks.command(name="list", context_settings=_HELP)
@click.option("--json", "as_json", is_flag=True, help="The items as a JSON array.")
def list_tasks(as_json: bool) -> None:
    """List the work items (the next one marked with >)."""
    current = read_backlog(project_backlog())
    if as_json:
        say_json([item.to_json() for item in current.items])
        return
    if not current.items:
        say("no work items (autopilot tasks add PROMPT, or autopilot tasks import FILE)")
        return
    for line in item_rows(current.items, interrupted=_interrupted(current)):
        say(line)


@tasks.command(context_settings=_HELP)
@click.argument("item_id", metavar="ID")
def show(item_id: str) -> None:
    """Show one work item in full."""
    current = read_backlog(project_backlog())
    item = find_item(current, item_id)
    for line in item_details(item, current.items, interrupted=_interrupted(current)):
        say(line)


def _interrupted(current: BacklogFile) -> bool:
    """An item is running in the file and no run of the project holds it."""
    from autopilot.cli.tasks_guard import a_run_holds_items

    running = any(item.status is ItemStatus.RUNNING for item in current.items)
    return running and not a_run_holds_items(project_here())


@tasks.command(context_settings=_HELP)
@click.argument("item_id", metavar="ID")
@click.option("--reason", required=True, metavar="TEXT", help="Why it is blocked.")
def block(item_id: str, reason: str) -> None:
    """Hold a work item back until it is unblocked."""
    if not reason.strip():
        raise UsageError("--reason is empty")

    def change(item: WorkItem) -> WorkItem:
        if not item.is_open:
            raise BacklogError(f"{item.id} is {item.status.value}; reopen it first")
        return item.with_status(ItemStatus.BLOCKED, blocked_reason=reason)

    change_item(item_id, change)
    say(f"autopilot: {item_id} is blocked: {reason}")


@tasks.command(context_settings=_HELP)
@click.argument("item_id", metavar="ID")
def unblock(item_id: str) -> None:
    """Let a blocked work item be taken again."""

    def change(item: WorkItem) -> WorkItem:
        if item.status is not ItemStatus.BLOCKED:
            raise BacklogError(f"{item.id} is {item.status.value}, not blocked")
        status = ItemStatus.REOPENED if item.completion.reopen_target else ItemStatus.READY
        completion = item.completion
        if completion.state is CompletionState.AWAITING_USER:
            completion = replace(completion, state=CompletionState.IN_PROGRESS)
        return fresh_attempts(item).with_status(status, blocked_reason=None, completion=completion)

    item, _ = change_item(item_id, change)
    say(f"autopilot: {item_id} is {item.status.value}")
    _say_waiting_runs_go_on()


@tasks.command(context_settings=_HELP)
@click.argument("item_id", metavar="ID")
def reopen(item_id: str) -> None:
    """Open a completed, stopped, not-applicable or blocked work item again."""

    from autopilot.cli.tasks_guard import a_run_holds_items

    def change(item: WorkItem) -> WorkItem:
        held = item.status is ItemStatus.RUNNING and a_run_holds_items(project_here())
        if item.status in (ItemStatus.READY, ItemStatus.REOPENED) or held:
            raise BacklogError(f"{item.id} is already open ({item.status.value})")
        completion = replace(
            item.completion,
            state=CompletionState.IN_PROGRESS,
            verdict=None,
            reopen_target=FocusLayer.MICRO,
        )
        return fresh_attempts(item).with_status(
            ItemStatus.REOPENED, blocked_reason=None, completion=completion
        )

    change_item(item_id, change)
    say(f"autopilot: {item_id} is reopened")
    _say_waiting_runs_go_on()


def _say_waiting_runs_go_on() -> None:
    """Name each run of this project that a change like this releases from its gate."""
    from autopilot.cli.tasks_guard import runs_waiting_at_a_backlog_gate

    for run_id in runs_waiting_at_a_backlog_gate(project_here()):
        say(
            f"autopilot: run {run_id}, waiting at its gate, goes on with this change "
            "(no answer needed)"
        )


@tasks.command(name="import", context_settings=_HELP)
@click.argument("path", metavar="FILE")
def import_tasks(path: str) -> None:
    """Add work items from a prd.json (userStories) or a Markdown checklist."""
    source = Path(path).expanduser()
    try:
        data = read_bounded_regular_file(source, MAX_IMPORT_BYTES)
    except BacklogError:
        raise
    if data is None:
        raise UsageError(f"no file {path}")
    imported: list[Imported] = []

    def change(current: BacklogFile) -> BacklogFile:
        found = parse_import(data, source.name, current.items)
        for item in found.items:
            checked_item(item, BacklogError)
        new_ids = {item.id for item in found.items}
        for problem in backlog_problems(current.append(found.items).items):
            if problem.kind == "dependency_cycle" and new_ids & set(problem.ids):
                raise BacklogError(f"{source.name}: {problem.message}; nothing was imported")
        imported.append(found)
        return current.append(found.items) if found.items else current

    project_backlog().update(change)
    added, skipped = imported[-1].items, imported[-1].skipped
    done = sum(1 for i in added if i.status is ItemStatus.COMPLETED)
    already = f"; {skipped} skipped, already in the backlog" if skipped else ""
    say(
        f"autopilot: imported {len(added)} work item{'' if len(added) == 1 else 's'} from {path} "
        f"({len(added) - done} open, {done} already done{already})"
    )
    on_word = unchecked(added)
    if on_word:
        say(
            f"autopilot: {len(on_word)} item{'s have' if len(on_word) != 1 else ' has'} "
            "criteria with no check: they complete on the agent's report; add checks with "
            f"`autopilot tasks edit {on_word[0]} --criterion 'TEXT :: CHECK'`"
        )


tasks.add_command(edit)
tasks.add_command(remove)
