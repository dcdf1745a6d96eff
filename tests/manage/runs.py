"""Runs in every condition (ended, active, gone, corrupt, orphaned), for stats/prune/doctor."""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path
from typing import Any

import psutil

from autopilot.store.index import append_index_row
from tests.view.runfiles import base_state

DAY_MS = 86_400_000


def now_ms() -> int:
    """The real time, in epoch ms."""
    return time.time_ns() // 1_000_000


def alive_driver() -> dict[str, Any]:
    """State fields naming this very process as the run's driver (so it is alive)."""
    return {
        "pid": os.getpid(),
        "pidStartTime": psutil.Process().create_time(),
        "host": socket.gethostname(),
    }


def dead_driver() -> dict[str, Any]:
    """State fields naming a driver process that does not exist."""
    return {"pid": 999_999_999, "pidStartTime": 1.0, "host": socket.gethostname()}


def make_run(
    root: Path,
    label: str,
    started_ms: int,
    *,
    terminal: tuple[str, str] | None = None,
    iterations: int = 1,
    tokens: tuple[int, int] = (100, 10),
    cost: float = 0.01,
    agent: str = "claude",
    state: dict[str, Any] | None = None,
    folder: bool = True,
    age_files: bool = True,
) -> str:
    """Write one run (state.json, events.jsonl, index row) that started at ``started_ms``.

    Args:
        root: The runs root.
        label: The run's label.
        started_ms: Its start (epoch ms); file times are set to it when ``age_files``.
        terminal: ``(type, reason)`` of its terminal event, or None for a run not ended.
        iterations: Iterations it started.
        tokens: Cumulative (input, output) tokens.
        cost: Cumulative cost (USD).
        agent: The agent name.
        state: Extra state.json fields.
        folder: False writes only the index row (an orphaned row).
        age_files: Set the files' modification times to ``started_ms``.

    Returns:
        The run id.
    """
    run_id = f"{label}-{started_ms}"
    armed = {
        "type": "armed",
        "ts": started_ms,
        "runId": run_id,
        "label": label,
        "maxIterations": 10,
        "minIterations": 1,
        "agent": agent,
    }
    root.mkdir(parents=True, exist_ok=True)
    append_index_row(root, armed)
    if not folder:
        return run_id
    path = root / run_id
    path.mkdir()
    ts = started_ms
    events = [armed]
    for number in range(1, iterations + 1):
        ts += 1000
        events.append({"type": "iteration_start", "ts": ts, "runId": run_id, "iteration": number})
        ts += 1000
        events.append(
            {
                "type": "iteration_end",
                "ts": ts,
                "runId": run_id,
                "iteration": number,
                "tokens": {"input": tokens[0], "output": tokens[1]},
                "costUsd": cost,
            }
        )
    fields: dict[str, Any] = {
        "iter": iterations,
        "agent": agent,
        "label": label,
        "spend": {
            "costUsd": cost,
            "tokens": {"input": tokens[0], "output": tokens[1]},
            "iterations": iterations,
        },
    }
    if terminal is not None:
        events.append({"type": terminal[0], "ts": ts + 1, "runId": run_id, "reason": terminal[1]})
        fields.update(
            terminated=True,
            terminationReason=terminal[1],
            status="completed" if terminal[0] == "complete" else "stopped",
        )
    fields.update(state or {})
    full_state = base_state(run_id, **fields)
    (path / "state.json").write_text(json.dumps(full_state, indent=2) + "\n")
    (path / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    if age_files:
        for name in ("state.json", "events.jsonl"):
            os.utime(path / name, (started_ms / 1000, started_ms / 1000))
    return run_id


def tree(root: Path) -> dict[str, tuple[bytes, int]]:
    """Every file under ``root`` with its bytes and mtime (to prove nothing changed)."""
    found = {}
    for folder, _, files in os.walk(root):
        for name in files:
            path = Path(folder) / name
            found[str(path.relative_to(root))] = (path.read_bytes(), path.stat().st_mtime_ns)
    return found


def cache_parts(root: Path) -> dict[str, dict[str, Any]]:
    """``finished.json`` by part (``list``, ``stats``): each line's object, its runs
    also as one entry a run (``"runs"``: run id → ``[value, *key]``) when they are
    columns (``store.finished_columns``)."""
    from autopilot.store.finished import FINISHED_FILE
    from autopilot.store.finished_columns import decoded, entries

    lines = (root / FINISHED_FILE).read_text().splitlines()
    parts = {part["part"]: part for part in map(json.loads, lines)}
    for part in parts.values():
        found = decoded(part)
        if found is not None:
            part["runs"] = entries(*found)
    return parts


def write_cache_parts(root: Path, parts: dict[str, dict[str, Any]]) -> None:
    """Write ``parts`` (as ``cache_parts`` gives them, ``"runs"`` edited as one entry a
    run) as ``finished.json``: the entries as columns where each is a value list and
    a key (three or four ints) and the values are lists of one length; else as they
    are (a part ``finished.json`` then finds corrupt whole)."""
    from autopilot.store.finished import FINISHED_FILE
    from autopilot.store.finished_columns import encoded

    lines = []
    for part in parts.values():
        written = dict(part)
        runs = written.pop("runs", None)
        if runs is not None:
            fit = all(
                isinstance(entry, list)
                and len(entry) in (4, 5)
                and all(type(number) is int for number in entry[1:])
                for entry in runs.values()
            )
            columns = encoded(runs, list(runs)) if fit else None
            written.update(columns or {"runs": runs})
        lines.append(json.dumps(written, separators=(",", ":")) + "\n")
    (root / FINISHED_FILE).write_text("".join(lines))
