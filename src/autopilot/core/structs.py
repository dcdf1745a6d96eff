"""Copies of typed records: ``replace`` for the ``msgspec.Struct`` records and for the
dataclasses that remain, and ``assign`` to bring a mutable record's fields over from
another of its type.

The records every driver, ``pause`` and ``send`` load are Structs: a Struct class is
made in some 15 µs, where a dataclass takes about 0.5 ms at import (most of it
compiling its generated methods), and a driver defines some seventy of them before it
starts its first agent (``docs/architecture.md``, "Start-up").
"""

from __future__ import annotations

from msgspec import Struct
from msgspec.structs import replace as _replace_struct

TYPE_CHECKING = False  # as typing's, without importing typing at run time
if TYPE_CHECKING:
    from typing import Any, TypeVar

    R = TypeVar("R")
    S = TypeVar("S", bound=Struct)


def replace(record: R, /, **changes: Any) -> R:
    """A copy of ``record`` with ``changes`` (field name → value).

    Args:
        record: A ``msgspec.Struct`` or a dataclass instance.
        **changes: New values of some of its fields.

    Raises:
        TypeError: a name that is not one of its fields, or a record of neither kind.
    """
    if isinstance(record, Struct):
        return _replace_struct(record, **changes)
    import dataclasses

    return dataclasses.replace(record, **changes)  # type: ignore[type-var]


def assign(target: S, source: S) -> None:
    """Set each field of ``target`` (a mutable Struct) to ``source``'s value."""
    for name in source.__struct_fields__:
        setattr(target, name, getattr(source, name))
