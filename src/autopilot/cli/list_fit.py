"""Whether what ``list`` kept of a run in ``finished.json`` is a row it could have made
afresh (``cli.list_body._fresh_row``): a kept row of other types or shapes, as a hand
edit may leave one, is read afresh from the run's files instead of being shown."""

from __future__ import annotations

TYPE_CHECKING = False  # as typing's, without importing typing at run time
if TYPE_CHECKING:
    from typing import Any, TypeGuard

_NONE = type(None)
_FIELD_TYPES: tuple[set[type], ...] = (
    {str, _NONE},
    {str, _NONE},
    {int, _NONE},
    {str},
    {dict, _NONE},
)
"""The types each field of a row made afresh can have: ``status``, ``reason``,
``iterations``, ``text``, ``worktree``."""


def all_fit(rows: list[Any]) -> bool:
    """Is every row one ``_fresh_row`` could have made (a kept one may hold anything a
    hand edit left), checked a field of every row at a time (in C: ``map``)?"""
    if not rows or set(map(type, rows)) != {list} or set(map(len, rows)) != {len(_FIELD_TYPES)}:
        return not rows
    return columns_fit(list(zip(*rows, strict=True)))


def columns_fit(columns: list[Any]) -> bool:
    """``all_fit`` of rows given a column a field."""
    if len(columns) != len(_FIELD_TYPES):
        return False
    if any(
        set(map(type, column)) - allowed
        for column, allowed in zip(columns, _FIELD_TYPES, strict=True)
    ):
        return False
    return all(map(_worktree_fits, columns[-1])) if dict in map(type, columns[-1]) else True


def fits(row: Any) -> TypeGuard[list[Any]]:
    """``all_fit`` of one row."""
    if row.__class__ is not list or len(row) != len(_FIELD_TYPES):
        return False
    kinds = zip(map(type, row), _FIELD_TYPES, strict=True)
    return all(kind in allowed for kind, allowed in kinds) and _worktree_fits(row[-1])


def _worktree_fits(worktree: Any) -> bool:
    """None, or a ``worktree`` record as ``control_body.worktree_of`` makes one."""
    if worktree is None:
        return True
    fields = ("path", "branch", "base", "origin")
    return (
        isinstance(worktree, dict)
        and set(worktree) == set(fields)
        and all(isinstance(worktree[key], str) and worktree[key] for key in fields)
    )
