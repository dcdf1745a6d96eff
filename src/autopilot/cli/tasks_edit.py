"""``autopilot tasks edit`` and ``autopilot tasks remove``: a person's change to one
work item of ``.autopilot/tasks.jsonl``.

``edit`` with options replaces what they name (``--surface`` and ``--depends-on``
replace the whole list; one empty value empties it); without options it opens the
item as JSON in ``$EDITOR``, holding no lock while the editor is open: the edit is
saved under the lock only if the item is still as it was when the editor opened.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import click

from autopilot.cli.echo import say
from autopilot.cli.tasks_common import (
    change_item,
    checked_item,
    find_item,
    parse_criteria,
    project_backlog,
)
from autopilot.core.structs import replace
from autopilot.core.workitems import (
    Completion,
    ItemFormatError,
    ItemStatus,
    WorkItem,
    check_id,
    item_from_json,
)
from autopilot.errors import BacklogError, UsageError
from autopilot.store.backlog import BacklogFile

_HELP = {"help_option_names": ["-h", "--help"]}
_EDIT_OPTIONS = (
    "--prompt TEXT, --title TEXT, --criterion TEXT[ :: CHECK], --surface PATH, "
    "--depends-on ID or --status STATUS"
)


def _replacing(values: tuple[str, ...]) -> tuple[str, ...] | None:
    """A list option's values as the new list: None when not given, empty for one
    empty value (``--surface ''``)."""
    if not values:
        return None
    return tuple(v for v in values if v.strip()) if values != ("",) else ()


@click.command(context_settings=_HELP)
@click.argument("item_id", metavar="ID")
@click.option("--prompt", metavar="TEXT", help="A new prompt.")
@click.option("--title", metavar="TEXT", help="A new title.")
@click.option(
    "--criterion",
    "criteria",
    multiple=True,
    metavar="TEXT[ :: CHECK]",
    help="Replace the acceptance criteria (repeat for each).",
)
@click.option(
    "--surface",
    "surface",
    multiple=True,
    metavar="PATH",
    help="Replace the paths it may change (repeat for each; '' for none).",
)
@click.option(
    "--depends-on",
    "depends_on",
    multiple=True,
    metavar="ID",
    help="Replace the items to do first (repeat for each; '' for none).",
)
@click.option("--status", type=click.Choice([s.value for s in ItemStatus]), help="A new status.")
def edit(
    item_id: str,
    prompt: str | None,
    title: str | None,
    criteria: tuple[str, ...],
    surface: tuple[str, ...],
    depends_on: tuple[str, ...],
    status: str | None,
) -> None:
    """Change a work item: with options, or else in $EDITOR as JSON."""
    changes: dict[str, Any] = {}
    if prompt is not None:
        if not prompt.strip():
            raise UsageError("--prompt is empty")
        changes["prompt"] = prompt
    if title is not None:
        changes["title"] = title or None
    if criteria:
        changes["acceptance_criteria"] = parse_criteria(criteria)
    if (surfaces := _replacing(surface)) is not None:
        changes["allowed_surface"] = surfaces
    if (deps := _replacing(depends_on)) is not None:
        try:
            changes["depends_on"] = tuple(check_id(dep, "--depends-on") for dep in deps)
        except ItemFormatError as error:
            raise UsageError(str(error)) from None
    if not changes and status is None:
        _refuse_without_an_editor()
        _edit_in_editor(item_id)
        return

    def change(item: WorkItem) -> WorkItem:
        new = dict(changes)
        if status is not None:
            new["status"] = ItemStatus(status)
            if status == "not_applicable":
                new["completion"] = Completion(extra=item.completion.extra)
        return checked_item(replace(item, **new))

    _, changed = change_item(item_id, change)
    say(f"autopilot: {item_id} {'changed' if changed else 'unchanged'}")


def _refuse_without_an_editor() -> None:
    """Refuse to open an editor when none can be used: no $VISUAL or $EDITOR named
    and no terminal for the system's default one.

    Raises:
        UsageError: no editor can be opened here.
    """
    named = os.environ.get("VISUAL") or os.environ.get("EDITOR")
    if not named and not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise UsageError(
            f"no terminal to edit the item in (and no $EDITOR): change it with {_EDIT_OPTIONS}"
        )


def _edit_in_editor(item_id: str) -> None:
    """Edit the item as JSON in the editor, holding no lock meanwhile; saved under the
    lock only if the item is still as it was read.

    Raises:
        UsageError: the editor could not be run.
        BacklogError: not JSON, not a work item, its id changed, or the item changed
            in the file while it was being edited (nothing is saved).
    """
    from autopilot.cli.tasks_guard import refuse_during_an_iteration

    backlog = project_backlog()
    refuse_during_an_iteration(backlog.project)  # asked again under the lock at the save
    before = find_item(backlog.read(), item_id)
    text = json.dumps(before.to_json(), indent=2, ensure_ascii=False) + "\n"
    try:
        edited = click.edit(text, extension=".json")
    except click.ClickException as error:
        raise UsageError(
            f"{error.format_message()}; change the item with {_EDIT_OPTIONS}"
        ) from None
    if edited is None or edited == text:
        say(f"autopilot: {item_id} unchanged")
        return
    try:
        after = item_from_json(json.loads(edited))
    except (ValueError, ItemFormatError) as error:
        raise BacklogError(f"not saved: {error}") from None
    if after.id != before.id:
        raise BacklogError("not saved: the id cannot be changed")

    def change(item: WorkItem) -> WorkItem:
        if item != before:
            raise BacklogError(
                f"not saved: {item_id} changed in the file while it was being edited; edit it again"
            )
        return after

    _, changed = change_item(item_id, change)
    say(f"autopilot: {item_id} {'changed' if changed else 'unchanged'}")


@click.command(context_settings=_HELP)
@click.argument("item_id", metavar="ID")
@click.option(
    "--force",
    is_flag=True,
    help="Remove it even if it is running or others depend on it (they then no longer do).",
)
def remove(item_id: str, force: bool) -> None:
    """Remove a work item from the backlog."""
    from autopilot.cli.tasks_guard import a_run_holds_items, refuse_during_an_iteration

    project = project_backlog()
    freed: list[str] = []

    def change(current: BacklogFile) -> BacklogFile:
        refuse_during_an_iteration(project.project)  # under the lock the run marks its turn in
        item = find_item(current, item_id)
        if item_id in current.duplicate_ids:
            raise BacklogError(
                f"work item id {item_id!r} is used twice in .autopilot/tasks.jsonl; "
                "give each item its own id first"
            )
        dependents = [i for i in current.items if item_id in i.depends_on and i.id != item_id]
        if not force and item.status is ItemStatus.RUNNING and a_run_holds_items(project.project):
            raise BacklogError(
                f"{item_id} is running; stop its run first, or add --force to remove it"
            )
        if not force and dependents:
            named = ", ".join(i.id for i in dependents)
            raise BacklogError(
                f"{named} depend{'s' if len(dependents) == 1 else ''} on {item_id}; change "
                f"that first (autopilot tasks edit ID --depends-on ...), or add --force"
            )
        freed.extend(i.id for i in dependents)
        loose = [
            replace(i, depends_on=tuple(d for d in i.depends_on if d != item_id))
            for i in dependents
        ]
        return current.without(item_id).with_items(loose)

    project.update(change)
    verb = "depends" if len(freed) == 1 else "depend"
    after = f" ({', '.join(freed)} no longer {verb} on it)" if freed else ""
    say(f"autopilot: {item_id} removed{after}")
