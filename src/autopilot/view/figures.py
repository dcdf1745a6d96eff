"""Numbers as the views show them (token counts, dollars), without the imports of
``view.present``: ``stats`` formats its totals with these alone."""

from __future__ import annotations

TYPE_CHECKING = False  # as typing's, without importing typing at run time
if TYPE_CHECKING:
    from typing import Any


def as_number(value: Any) -> float | None:
    """``value`` as a float if it is a JSON number (not a bool), else None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def fmt_count(value: Any) -> str:
    """A token count: ``850``, ``12.3k``, ``4.51M``."""
    number = as_number(value) or 0.0
    if number >= 1_000_000:
        return f"{number / 1_000_000:.3g}M"
    if number >= 10_000:
        return f"{number / 1000:.1f}k"
    return f"{int(number)}"


def fmt_cost(value: Any) -> str:
    """USD: ``$0.0036`` below a dollar, ``$12.34`` above."""
    number = as_number(value) or 0.0
    return f"${number:.4f}" if number < 1 else f"${number:,.2f}"
