"""``autopilot stats``: totals over every run in the index.

Runs are the ``armed`` rows of ``index.jsonl`` (one sequential read; the last row of
a run id wins). Each run's outcome is counted as the Node tool's ``stats`` counts it
(``docs/formats.md``, "Terminal reasons"): the **last** ``complete``/``abort`` row of its log,
bucketed as ``"<type>:<reason>"`` (just ``<type>`` when the reason is empty). It is
found by reading the log backwards only as far as the run's last iteration, so a
huge log costs a few KiB. A run with no terminal event is ``active``,
``interrupted`` (its driver is gone) or ``unknown``; one whose folder is gone is
``missing``. Iterations, tokens and cost come from ``state.json``, whose spend
survives restarts, else from the terminal event.
"""

from __future__ import annotations

import json
import os
from collections import Counter, namedtuple
from collections.abc import Iterable, Iterator, Mapping
from itertools import compress, repeat
from operator import itemgetter

from autopilot.store.bulk import keep_until_exit
from autopilot.store.finished import FinishedRuns, file_key
from autopilot.store.paths import is_valid_run_id, valid_run_ids
from autopilot.view.stats_types import columns_fit_summaries, well_typed

TYPE_CHECKING = False  # as typing's, without importing typing at run time
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any, NamedTuple

    Root = str | os.PathLike[str]

# A run's typed ``state.json``, its driver and the end of its log are read by the
# functions that summarise a run afresh: ``stats`` of ended runs takes them from
# ``finished.json`` and loads none of that code.

_SCAN_BLOCK_BYTES = 4096
_STOP_TYPES = frozenset({"iteration_start", "armed"})


if TYPE_CHECKING:

    class RunSummary(NamedTuple):
        """One run as ``stats`` counts it (a tuple: ten thousand are made from
        ``finished.json`` in one ``stats``).

        Attributes:
            run_id: The run id.
            label: The run's label.
            agent: The agent name (None when unknown).
            outcome: ``complete:<reason>``, ``abort:<reason>``, ``active``,
                ``interrupted``, ``unknown`` or ``missing``.
            iterations: Iterations started (None when unknown).
            tokens_in: Cumulative input tokens.
            tokens_out: Cumulative output tokens.
            cost_usd: Cumulative cost in USD.
        """

        run_id: str
        label: str
        agent: str | None
        outcome: str
        iterations: int | None
        tokens_in: int
        tokens_out: int
        cost_usd: float

else:  # the same tuple, without importing typing (``stats`` loads no typing)
    RunSummary = namedtuple(
        "RunSummary", "run_id label agent outcome iterations tokens_in tokens_out cost_usd"
    )


def last_terminal_event(path: Path) -> dict[str, Any] | None:
    """The log's last ``complete``/``abort`` row, read backwards (plain JSON, as the Node tool's).

    The scan stops at the last ``iteration_start`` or ``armed``: a terminal event
    is always written after them.
    """
    for row in _rows_backward(path):
        kind = row.get("type")
        if kind in ("complete", "abort"):
            return row
        if kind in _STOP_TYPES:
            return None
    return None


def last_logged_tokens(path: Path) -> Mapping[str, Any]:
    """The cumulative ``tokens`` of the log's last row that has them (``{}``: none).

    A run written by the Node implementation (``docs/formats.md``) keeps its tokens only
    there (its terminal rows and ``state.json`` have none).
    """
    for row in _rows_backward(path):
        if isinstance(row.get("tokens"), Mapping):
            from autopilot.view.present import as_mapping

            return as_mapping(row["tokens"])
        if row.get("type") in _STOP_TYPES:
            break
    return {}


def _rows_backward(path: Path) -> Iterator[dict[str, Any]]:
    from autopilot.view.tail import read_lines_backward

    for raw in read_lines_backward(path, block_bytes=_SCAN_BLOCK_BYTES):
        try:
            row = json.loads(raw)
        except (ValueError, RecursionError):
            continue
        if isinstance(row, dict):
            yield row


def _int(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return int(value)


def summarize_run(root: Root, row: Mapping[str, Any]) -> RunSummary:
    """Summarise one run from its index row, ``state.json`` and the end of its log."""
    return _summarize(root, row)[0]


def _summarize(root: Root, row: Mapping[str, Any]) -> tuple[RunSummary, list[Any] | None]:
    """``summarize_run``, and the record of the run's driver when it is gone
    (``runtime.liveness.driver_record``; else None)."""
    from pathlib import Path

    from autopilot.runtime.liveness import driver_record, driver_running
    from autopilot.store.rundir import RunDir
    from autopilot.store.state import read_state_quietly

    run_id = str(row["runId"])
    folder = Path(root, run_id)
    valid = is_valid_run_id(run_id)
    gone = None
    state = read_state_quietly(RunDir(folder).state) if valid else None
    terminal = last_terminal_event(RunDir(folder).events) if valid else None
    if terminal is not None:
        reason = terminal.get("reason")
        outcome = f"{terminal['type']}:{reason}" if reason else str(terminal["type"])
    elif state is None:
        outcome = "missing" if not valid or not folder.exists() else "unknown"
    elif state.terminated:
        kind = "complete" if state.completed else "abort"
        reason = state.termination_reason
        outcome = f"{kind}:{reason}" if reason else kind
    else:
        running = driver_running(folder, state)
        outcome = {True: "active", False: "interrupted", None: "unknown"}[running]
        if running is False:
            gone = driver_record(state)
    # Spend is the larger of state.json's and the log's (a run written by the Node
    # implementation keeps its tokens only in the log).
    logged = terminal or {}
    logged_tokens = last_logged_tokens(RunDir(folder).events) if valid else {}
    spend = state.spend if state is not None else None
    iterations = state.iteration if state is not None else None
    if iterations is None and terminal is not None:
        iterations = _int(terminal.get("iteration"))
    agent = row.get("agent") or (state.agent if state is not None else None)
    summary = RunSummary(
        run_id=run_id,
        label=str(row.get("label") or (state.label if state is not None else None) or "-"),
        agent=str(agent) if agent else None,
        outcome=outcome,
        iterations=iterations,
        tokens_in=max(spend.tokens.input if spend else 0, _int(logged_tokens.get("input")) or 0),
        tokens_out=max(spend.tokens.output if spend else 0, _int(logged_tokens.get("output")) or 0),
        cost_usd=max(
            spend.cost_usd if spend else 0.0,
            float(logged["costUsd"]) if isinstance(logged.get("costUsd"), int | float) else 0.0,
        ),
    )
    return summary, gone


def collect(root: Root) -> list[RunSummary]:
    """Summaries of every run in the index, oldest first (one per run id); an ended
    run's from ``finished.json`` while its files are as they were (``store.finished``)
    and its summary there has the types a fresh one has (else every run is read
    afresh, and the cache rewritten)."""
    finished = FinishedRuns(root, "stats")
    run_ids, labels, agents, well_formed = _index_columns(root, finished)
    finished.keep_only(set(run_ids))
    if False not in well_formed:  # every run kept and unchanged: from the columns at once
        kept = finished.kept_columns(root, run_ids, _still_gone)
        if kept is not None and columns_fit_summaries(kept, labels, agents):
            summaries = list(map(_new_summary, repeat(RunSummary), zip(*kept[2:], strict=True)))
            finished.save()  # the index's view, if it changed
            keep_until_exit(run_ids, labels, agents, finished, kept)
            return summaries
    valid = list(compress(run_ids, well_formed))
    found, keys = finished.lookup(root, valid, _still_gone)
    given = run_ids, labels, agents
    summaries = _summaries(root, given, finished, found, keys)
    if not well_typed(summaries):  # a cache edited by hand: read every run afresh
        keys.update((run_id, file_key(f"{root}/{run_id}")) for run_id in found)
        summaries = _summaries(root, given, finished, {}, keys)
    finished.save()
    keep_until_exit(given, finished, found, keys)
    return summaries


def _index_columns(root: Root, finished: FinishedRuns) -> list[list[Any]]:
    """What ``stats`` takes of ``index.jsonl``, a column a field: each run id (the
    last row of a run id counts, in its place), its row's ``label`` and ``agent``
    (None when missing), whether the id is well formed (``valid_run_ids``); kept in
    ``finished.json`` while the index is unchanged (``FinishedRuns.index_columns``)."""
    return finished.index_columns(root, _columns_of, _columns_fit)


def _columns_of(rows: Iterator[dict[str, Any]]) -> list[list[Any]]:
    by_id: dict[str, dict[str, Any]] = {}
    for row in rows:
        run_id = row["runId"]  # a string (``read_index``)
        by_id.pop(run_id, None)
        by_id[run_id] = row
    run_ids, valid = list(by_id), set(valid_run_ids(by_id))
    columns = [[row.get(field) for row in by_id.values()] for field in ("label", "agent")]
    return [run_ids, *columns, [run_id in valid for run_id in run_ids]]


def _columns_fit(columns: list[list[Any]]) -> bool:
    return (
        len(columns) == 4
        and len(set(columns[0])) == len(columns[0])  # one row a run
        and set(map(type, columns[3])) <= {bool}
    )


def _summaries(
    root: Root,
    given: tuple[list[str], list[Any], list[Any]],
    finished: FinishedRuns,
    found: dict[str, Any],
    keys: dict[str, list[int] | None],
) -> list[RunSummary]:
    """``collect``'s summaries of the runs ``given`` (their ids, labels and agents):
    ``found`` (``FinishedRuns.lookup``) where it is one, else read afresh (kept in
    ``finished`` with the run's key in ``keys``)."""
    summaries = []
    for run_id, label, agent in zip(*given, strict=True):
        cached = found.get(run_id)
        if (
            cached.__class__ is list
            and len(cached) == _CACHED_FIELDS
            and cached[0] == label
            and cached[1] == agent
            and cached[0].__class__ is label.__class__
            and cached[1].__class__ is agent.__class__
        ):
            summaries.append(_new_summary(RunSummary, cached[2:]))
            continue
        row = {"runId": run_id, "label": label, "agent": agent}  # all a summary takes
        if run_id in keys:
            summaries.append(_summary(root, row, finished, keys[run_id]))
        elif run_id in found:  # a cached summary not of this shape: read afresh
            summaries.append(_summary(root, row, finished, file_key(f"{root}/{run_id}")))
        else:
            summaries.append(summarize_run(root, row))
    return summaries


def _summary(
    root: Root, row: Mapping[str, Any], finished: FinishedRuns, key: list[int] | None
) -> RunSummary:
    """The run summarised afresh, and kept in ``finished`` (with ``key``, its files as
    they were before it was read) when its summary can no longer change by itself."""
    summary, gone = _summarize(root, row)
    # An ended run's summary depends on its files alone; an interrupted one's also on
    # its driver staying gone.
    if summary.outcome.startswith(("complete", "abort")) or gone is not None:
        given = [row.get("label"), row.get("agent")]  # what it takes from the index row
        finished.put(str(row["runId"]), key, [*given, *summary], gone)
    return summary


_new_summary = tuple.__new__
"""``RunSummary._make`` without its check of the length (``_summaries`` checks it) and
without a Python call: ten thousand are made from ``finished.json`` in one ``stats``."""
_CACHED_FIELDS = 2 + len(RunSummary._fields)
"""A run's ``stats`` in ``finished.json``: its index row's label and agent, then its
``RunSummary``."""


def _still_gone(where: str, driver: list[Any]) -> bool:
    from autopilot.runtime.liveness import still_gone

    return still_gone(where, driver)


def _ranked(counter: Counter[str]) -> dict[str, int]:
    return dict(sorted(counter.items(), key=lambda item: (-item[1], item[0])))


def aggregate(summaries: Iterable[RunSummary]) -> dict[str, Any]:
    """Totals for ``stats --json``.

    Returns:
        ``runs``; ``byOutcome``, ``byLabel``, ``byAgent`` (count per key, largest
        first); ``iterations`` (``min``, ``median``, ``max``, ``total`` over runs
        that report them; None when none do); ``tokens`` ``{input, output}``;
        ``costUsd``.
    """
    items = list(summaries)
    counts = [count for count in map(_ITERATIONS, items) if count is not None]
    agents = Counter(map(_AGENT, items))
    if None in agents:
        agents["unknown"] += agents.pop(None)
    if "" in agents:
        agents["unknown"] += agents.pop("")
    return {
        "runs": len(items),
        "byOutcome": _ranked(Counter(map(_OUTCOME, items))),
        "byLabel": _ranked(Counter(map(_LABEL, items))),
        "byAgent": _ranked(agents),
        "iterations": {
            "min": min(counts) if counts else None,
            "median": _median(counts) if counts else None,
            "max": max(counts) if counts else None,
            "total": sum(counts),
        },
        "tokens": {
            "input": sum(map(_TOKENS_IN, items)),
            "output": sum(map(_TOKENS_OUT, items)),
        },
        "costUsd": round(sum(map(_COST, items)), 6),
    }


_LABEL, _AGENT, _OUTCOME, _ITERATIONS, _TOKENS_IN, _TOKENS_OUT, _COST = (
    itemgetter(RunSummary._fields.index(name))
    for name in ("label", "agent", "outcome", "iterations", "tokens_in", "tokens_out", "cost_usd")
)
"""A ``RunSummary``'s fields, taken by ``map`` (in C) over thousands of runs."""


def _median(values: list[int]) -> float | int:
    """The median of ``values`` (not empty), as ``statistics.median`` gives it (the mean
    of the middle two of an even count), without that module's imports."""
    ordered = sorted(values)
    middle = len(ordered) // 2
    if len(ordered) % 2:
        return ordered[middle]
    return (ordered[middle - 1] + ordered[middle]) / 2
