"""The text of ``autopilot list``, made a column at a time (thousands of runs): each
run's start, id, iterations and status in words from the index's columns and the
runs' shown values (``cli.list_body``); the values a line takes from the runs are
redacted and escaped value by value when any needs it (``_shown_lines``)."""

from __future__ import annotations

import time
from itertools import chain, repeat
from operator import floordiv

from autopilot.store.bulk import keep_until_exit

TYPE_CHECKING = False  # as typing's, without importing typing at run time
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

_HEADER = f"{'started':<16}  {'run':<40} {'iteration':<10} status"


def list_text(
    run_ids: list[str],
    starts: list[int | None],
    most: list[str],
    shown: list[list[Any]],
    unclaimed: dict[str, int],
    now_ms: int,
) -> str:
    """The text of ``list`` made a column at a time (thousands of runs): the index's
    columns (``_index_columns``) and the runs' shown values ``shown``, a column a
    field (``_LIST_FIELDS``); the lines made of the values as they are, which
    ``_shown_lines`` checks (and remakes, if it must)."""
    count = len(run_ids)
    _, reasons, iterations, shown_texts, worktrees = shown
    texts = list(map(str, shown_texts))
    for index in (
        [i for i, run_id in enumerate(run_ids) if run_id in unclaimed] if unclaimed else ()
    ):
        if reasons[index] is None:
            from autopilot.view.plain import format_moment

            until = format_moment(unclaimed[run_ids[index]], day_of_ms=now_ms)
            texts[index] = f"armed, unclaimed until {until} (no session has stopped yet)"
    whens = _whens(starts)
    if None in iterations:
        done = ["?" if made is None else str(made) for made in iterations]
    else:
        done = list(map(str, iterations))
    no_worktree = worktrees.count(None) == count  # nearly always: no branch to show
    branches = [""] * count if no_worktree else list(map(_branch, worktrees))
    columns = [run_ids, done, most, texts, branches]
    keep_until_exit(shown, whens, columns)
    return _shown_lines(whens, columns)


def _whens(starts: list[int | None]) -> list[str]:
    """Each start's local minute (``_minute``), ``????-??-?? ??:??`` for none: in C
    when every run has one."""
    minutes: dict[int, str] = {}
    if set(map(type, starts)) == {int}:
        per_minute = list(map(floordiv, starts, repeat(60_000)))
        for minute in set(per_minute):
            _minute(minute * 60_000, minutes)
        return list(map(minutes.__getitem__, per_minute))
    return [
        "????-??-?? ??:??" if at is None else minutes.get(at // 60_000) or _minute(at, minutes)
        for at in starts
    ]


def _branch(worktree: Any) -> str:
    """The branch shown of a run's worktree record (``control_body.worktree_of``):
    its ``branch`` when a non-empty string, else none ("")."""
    branch = worktree.get("branch") if isinstance(worktree, dict) else None
    return branch if isinstance(branch, str) and branch else ""


def _shown_lines(whens: list[str], columns: list[list[str]]) -> str:
    """The text of ``list``: a header, then a line per run (``_line``) made of its
    start ``whens`` and the values of ``columns`` (id, iterations done and most,
    status text, branch): as they are when no value taken from a run's files or its
    index row needs ``view.safe.shown`` (checked once over them all, ``_shower``),
    the text then joined in one pass over every run's pieces (in C); else each
    distinct value shown (secrets redacted, controls escaped)."""
    show = _shower(set().union(*columns))
    if show is not _as_it_is:
        lines = [_line(cells, show) for cells in zip(whens, *columns, strict=True)]
        return "\n".join([_HEADER, *lines])
    run_ids, done, most, texts, branches = columns
    if branches.count("") != len(branches):
        branches = [f"  (worktree, branch {branch})" if branch else "" for branch in branches]
    pieces = zip(
        repeat("\n"),
        whens,
        repeat("  "),
        map(str.ljust, run_ids, repeat(40)),
        repeat(" iter "),
        done,
        repeat("/"),
        map(str.ljust, most, repeat(4)),
        repeat(" "),
        texts,
        branches,
    )
    return _HEADER + "".join(chain.from_iterable(pieces))


def _line(cells: tuple[str, str, str, str, str, str], show: Callable[[str], str]) -> str:
    """One run's line of ``list`` (as ``_shown_lines`` joins it), its values shown by
    ``show``."""
    when, run_id, done, most, text, branch = cells
    on_branch = f"  (worktree, branch {show(branch)})" if branch else ""
    return f"{when}  {show(run_id):<40} iter {show(done)}/{show(most):<4} {show(text)}{on_branch}"


def _shower(pool: set[str]) -> Callable[[str], str]:
    """How the values in ``pool`` are shown: as they are when none holds a control
    character (all printable) and no secret shape is found in them together (as
    ``core.redact.redact`` finds one, in values joined by NULs, which no pattern
    crosses); else ``view.safe.shown``, once per distinct value."""
    from autopilot.core.redact import may_hold_secret_in, redact

    if " ".join(pool).isprintable():
        if not may_hold_secret_in(pool):  # as a rule: no value to look at again
            return _as_it_is
        joined = "\0".join(pool)
        if redact(joined) == joined:
            return _as_it_is
    from autopilot.view.safe import shown

    memo: dict[str, str] = {}

    def show(value: str) -> str:
        got = memo.get(value)
        if got is None:
            got = memo[value] = shown(value)
        return got

    return show


def _as_it_is(value: str) -> str:
    return value


def _minute(ms: int, shown: dict[int, str]) -> str:
    """The local minute of epoch ``ms`` (``2026-12-02 05:22``), kept in ``shown`` by
    minute: runs started in the same minute share it (a time zone's offset changes on
    a whole minute)."""
    minute = ms // 60_000
    text = shown.get(minute)
    if text is None:
        text = shown[minute] = time.strftime("%Y-%m-%d %H:%M", time.localtime(minute * 60))
    return text
