"""Whether ``stats`` summaries kept in ``finished.json`` have the types a fresh read
gives them (``view.stats``): a cache a hand edit left otherwise is read afresh."""

from __future__ import annotations

TYPE_CHECKING = False  # as typing's, without importing typing at run time
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

_FIELD_TYPES: tuple[set[type], ...] = (
    {str},
    {str},
    {str, type(None)},
    {str},
    {int, type(None)},
    {int},
    {int},
    {float},
)
"""The types each field of a ``RunSummary`` made afresh can have (in field order)."""
_INFINITE = (float("inf"), float("-inf"))
_CACHED_FIELDS = 2 + len(_FIELD_TYPES)
"""A run's ``stats`` in ``finished.json``: its index row's label and agent, then its
``RunSummary``'s fields."""


def well_typed(summaries: Sequence[tuple[Any, ...]]) -> bool:
    """Does every field of every summary (``view.stats.RunSummary``) have a type a
    fresh one can have (checked a field at a time, in C: ``map`` of ``type``)?"""
    return not summaries or _columns_well_typed(list(zip(*summaries, strict=True)))


def _columns_well_typed(columns: list[Any]) -> bool:
    """``well_typed`` of summaries given a column a field."""
    if len(columns) != len(_FIELD_TYPES):
        return False
    if any(infinite in columns[-1] for infinite in _INFINITE):  # 1e400 in the file
        return False
    return all(
        set(map(type, column)) <= allowed
        for column, allowed in zip(columns, _FIELD_TYPES, strict=True)
    )


def same(kept: list[Any], now: list[Any]) -> bool:
    """Are the two columns equal value for value and type for type (``1``, ``1.0`` and
    ``true`` are equal in Python, and shown differently)?"""
    return kept == now and list(map(type, kept)) == list(map(type, now))


def columns_fit_summaries(kept: list[list[Any]], labels: list[Any], agents: list[Any]) -> bool:
    """Are ``finished.json``'s columns of ``stats`` (``_CACHED_FIELDS``) those of the
    index's ``labels`` and ``agents`` now, then summaries a fresh read could make?"""
    if len(kept) != _CACHED_FIELDS or not (same(kept[0], labels) and same(kept[1], agents)):
        return False
    return _columns_well_typed(kept[2:])
