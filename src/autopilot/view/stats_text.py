"""The text of ``autopilot stats``: ``view.stats.aggregate``'s totals, one line a
figure."""

from __future__ import annotations

from collections.abc import Mapping

TYPE_CHECKING = False  # as typing's, without importing typing at run time
if TYPE_CHECKING:
    from typing import Any


def _counts(values: Mapping[str, int]) -> str:
    from autopilot.view.safe import shown

    return " · ".join(f"{shown(key)} {count}" for key, count in values.items()) or "-"


def format_stats(totals: Mapping[str, Any]) -> list[str]:
    """The text form of ``aggregate``'s result, one line per figure."""
    from autopilot.view.figures import fmt_cost, fmt_count

    iterations = totals["iterations"]
    if iterations["min"] is None:
        iteration_line = "-"
    else:
        median = iterations["median"]
        shown = f"{median:g}" if isinstance(median, float) else str(median)
        iteration_line = (
            f"min {iterations['min']} · median {shown} · max {iterations['max']} "
            f"· total {iterations['total']}"
        )
    tokens = totals["tokens"]
    return [
        f"runs        {totals['runs']}",
        f"outcomes    {_counts(totals['byOutcome'])}",
        f"labels      {_counts(totals['byLabel'])}",
        f"agents      {_counts(totals['byAgent'])}",
        f"iterations  {iteration_line}",
        f"tokens      {fmt_count(tokens['input'])} in / {fmt_count(tokens['output'])} out",
        f"cost        {fmt_cost(totals['costUsd'])}",
    ]
