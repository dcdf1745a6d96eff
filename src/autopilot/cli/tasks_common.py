"""What the ``autopilot tasks`` commands share: the project's backlog, an item found by
id, criteria from the command line, an item checked as a line of ``tasks.jsonl``
would be, and a person's change to one item under the backlog's lock."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from autopilot.cli.echo import say
from autopilot.core.ready_queue import backlog_problems
from autopilot.core.workitems import Criterion, ItemFormatError, WorkItem, item_from_json
from autopilot.errors import BacklogError, UsageError
from autopilot.store.backlog import Backlog, BacklogFile
from autopilot.store.paths import project_of, runs_root

CHECK_SEPARATOR = " :: "
TASKS_PATH = Path(".autopilot/tasks.jsonl")


def project_here() -> Path:
    """The project the current directory is in (``store.paths.project_of``): in a
    subfolder, the project above it."""
    return project_of(Path.cwd().resolve())


def project_backlog(project: Path | None = None) -> Backlog:
    """The backlog of ``project`` (default: the project of the current directory)."""
    return Backlog(project.resolve() if project else project_here(), runs_root() / ".locks")


def read_backlog(backlog: Backlog) -> BacklogFile:
    """The file as it is now; each of its problems a warning on stderr.

    Raises:
        BacklogError: the file cannot be read.
    """
    current = backlog.read()
    for problem in current.problems():
        say(f"autopilot: warning: {problem}", err=True)
    return current


def find_item(current: BacklogFile, item_id: str) -> WorkItem:
    """The item ``item_id``.

    Raises:
        BacklogError: no such item (the message lists the first ids).
    """
    item = current.item(item_id)
    if item is None:
        known = ", ".join(i.id for i in current.items[:10]) or "none"
        raise BacklogError(f"no work item {item_id!r} in {TASKS_PATH} (items: {known})")
    return item


def parse_criteria(texts: Sequence[str]) -> tuple[Criterion, ...]:
    """``--criterion TEXT[ :: CHECK]`` values as criteria ``ac1``, ``ac2``…

    Raises:
        UsageError: a criterion with no text, or with ``::`` and no check after it.
    """
    criteria = []
    for number, text in enumerate(texts, start=1):
        words, separator, check = text.partition(CHECK_SEPARATOR)
        if not words.strip():
            raise UsageError(f"--criterion {text!r} has no text")
        if (separator and not check.strip()) or text.rstrip().endswith(" ::"):
            raise UsageError(
                f"--criterion {text!r} has no check after '::': give 'TEXT :: CHECK', "
                "or the TEXT alone for a criterion the agent's report decides"
            )
        if check.strip():
            criteria.append(Criterion(f"ac{number}", words.strip(), check.strip()))
        else:
            criteria.append(Criterion(f"ac{number}", words.strip(), plain=True))
    return tuple(criteria)


def checked_item(item: WorkItem, refused: type[Exception] = UsageError) -> WorkItem:
    """``item`` as its ``tasks.jsonl`` line would be read back (``item_from_json``):
    text that is not Unicode, or a surface outside the project, is refused here.

    Raises:
        refused: the item could not be read back (the message names the field).
    """
    try:
        return item_from_json(item.to_json())
    except ItemFormatError as error:
        raise refused(f"work item {item.id!r}: {error}") from None


def check_dependencies(current: BacklogFile, item: WorkItem) -> None:
    """Refuse ``item``'s ``depends_on`` if it names no item of ``current``, itself,
    or closes a dependency cycle.

    Raises:
        BacklogError: which dependency, or the cycle.
    """
    ids = {i.id for i in current.items}
    missing = [dep for dep in item.depends_on if dep not in ids or dep == item.id]
    if missing:
        raise BacklogError(f"--depends-on names no other work item: {', '.join(missing)}")
    after = current.with_items([item]).items
    for problem in backlog_problems(after):
        if problem.kind == "dependency_cycle" and item.id in problem.ids:
            raise BacklogError(f"not changed: {item.id} would close a {problem.message}")


def change_item(item_id: str, change: Callable[[WorkItem], WorkItem]) -> tuple[WorkItem, bool]:
    """Change one item under the backlog's lock (refused while a backlog run of this
    project is in an iteration: ``tasks_guard``); a changed ``depends_on`` is checked
    against the file (``check_dependencies``).

    Returns:
        The item after the change, and whether it changed (nothing is written if not).

    Raises:
        BacklogError: no such item, the change refused, or the file not written.
    """
    from autopilot.cli.tasks_guard import refuse_during_an_iteration

    project = project_here()
    changed: list[tuple[WorkItem, bool]] = []

    def apply(current: BacklogFile) -> BacklogFile:
        refuse_during_an_iteration(project)  # under the lock the run marks its turn in
        before = find_item(current, item_id)
        item = change(before)
        if item.depends_on != before.depends_on:
            check_dependencies(current, item)
        changed.append((item, item != before))
        return current.replace_item(item) if item != before else current

    project_backlog().update(apply)
    return changed[0]
