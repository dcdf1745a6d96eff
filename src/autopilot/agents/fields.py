"""Reading one field of an agent's JSON output: an object, a count, an amount, a text.

Agent output is untrusted: a field may be missing, of another type, negative or
absurd. Each reader returns a safe value instead of raising, so one odd field never
costs the rest of the line.
"""

from __future__ import annotations

import math
from typing import Any


def as_object(value: Any) -> dict[str, Any]:
    """``value`` if it is a JSON object, else an empty one (for optional fields)."""
    return value if isinstance(value, dict) else {}


def text(value: Any) -> str | None:
    """``value`` if it is a non-empty string, else None."""
    return value if isinstance(value, str) and value else None


def count(value: Any) -> int:
    """A token or call count: ``value`` if it is a positive integer (not a bool), else 0."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def usd(value: Any) -> float | None:
    """An amount in USD: ``value`` as a float if it is a finite number >= 0, else None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    amount = float(value)
    return amount if math.isfinite(amount) and amount >= 0 else None


def sum_counts(fields: dict[str, Any], *keys: str) -> int:
    """The sum of ``count`` over ``keys`` of ``fields`` (input plus cache tokens)."""
    return sum(count(fields.get(key)) for key in keys)
