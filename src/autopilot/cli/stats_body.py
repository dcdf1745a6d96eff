"""The body of ``autopilot stats``, without click: the command line
(``cli.manage_cmds``) and the fast path (``cli.fast``) both call it."""

from __future__ import annotations

from autopilot.cli.echo import say, say_json
from autopilot.store.bulk import CollectorOff, keep_until_exit
from autopilot.store.paths import runs_root_path
from autopilot.view.stats import aggregate, collect
from autopilot.view.stats_text import format_stats


def stats(as_json: bool) -> int:
    """``autopilot stats [--json]``; its exit code."""
    root = runs_root_path(create=False)  # a string: no pathlib for ended runs
    with CollectorOff():
        summaries = collect(root)
        totals = aggregate(summaries)
        keep_until_exit(summaries)  # with what ``collect`` read (``store.bulk``)
    if as_json:
        say_json(totals)
    else:
        say("\n".join(format_stats(totals)))
    return 0
