"""Runs on disk with fixed timestamps, for view tests: state.json, events.jsonl, output."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from autopilot.store.index import append_index_row
from autopilot.testkit.streamjson import StreamJson

T0 = 1_796_000_000_000
"""A fixed start time (epoch ms) for every scripted run."""

RUN_ID = f"demo-{T0}"


class FrozenClock:
    """A clock that stands still unless told to move (``Clock`` protocol)."""

    def __init__(self, now_ms: int) -> None:
        self.now = now_ms

    def now_ms(self) -> int:
        """The frozen time."""
        return self.now

    def monotonic(self) -> float:
        """Seconds, from the frozen time."""
        return self.now / 1000

    def sleep(self, seconds: float) -> None:
        """Move time forward instead of sleeping."""
        self.now += int(seconds * 1000)


def base_state(run_id: str = RUN_ID, **changes: Any) -> dict[str, Any]:
    """A state.json like ``arm_run`` writes, with ``changes`` applied."""
    state: dict[str, Any] = {
        "runId": run_id,
        "label": run_id.rsplit("-", 1)[0],
        "mode": "prompt",
        "contextMode": "fresh",
        "agent": "claude",
        "model": "claude-sonnet-4-5",
        "cwd": "/work/project",
        "startedAt": int(run_id.rsplit("-", 1)[1]),
        "max": 10,
        "min": 1,
        "iter": 0,
        "status": "running",
        "paused": False,
        "pausedAt": None,
        "totalPausedMs": 0,
        "stopRequested": False,
        "stopReason": None,
        "pid": None,
        "pidStartTime": None,
        "host": "testhost",
        "spend": {"costUsd": 0.0, "tokens": {"input": 0, "output": 0}, "iterations": 0},
        "waitingUntil": None,
        "terminated": False,
        "terminationReason": None,
        "terminationNote": None,
        "version": 1,
    }
    state.update(changes)
    return state


class EventWriter:
    """Builds an event list with increasing, fixed timestamps."""

    def __init__(self, run_id: str = RUN_ID, start_ms: int = T0) -> None:
        self.run_id = run_id
        self.ts = start_ms
        self.events: list[dict[str, Any]] = []

    def add(self, event_type: str, step_ms: int = 1000, **fields: Any) -> dict[str, Any]:
        """Append one event ``step_ms`` after the previous one."""
        self.ts += step_ms
        event = {"type": event_type, "ts": self.ts, "runId": self.run_id, **fields}
        self.events.append(event)
        return event

    def iteration(self, number: int, tokens: tuple[int, int], cost: float, commit: str) -> None:
        """A whole finished iteration with stages, substages, a commit and usage."""
        self.add("iteration_start", iteration=number)
        self.add("stage_plan", iteration=number, stages=["ORIENT", "IMPLEMENT", "TEST", "COMMIT"])
        for ordinal, name in enumerate(["ORIENT", "IMPLEMENT", "TEST", "COMMIT"], start=1):
            self.add("stage_start", iteration=number, stage=ordinal, stageName=name)
            self.add("substage", iteration=number, sub=1, verb="Bash", argsSummary="pytest -q")
            self.add(
                "stage_end", 20_000, iteration=number, stage=ordinal, stageName=name, outcome="ok"
            )
        self.add("commit_observed", iteration=number, sha=commit, subject=f"step {number}")
        total = {"input": tokens[0], "output": tokens[1]}
        self.add("usage_update", iteration=number, tokens=total, costUsd=cost)
        self.add(
            "iteration_end",
            iteration=number,
            excerpt=f"Finished step {number}.",
            outcome="ok",
            tokens=total,
            costUsd=cost,
            iterationTokens={"input": 2000, "output": 200},
            iterationCostUsd=0.01,
            filesChanged=2,
            commits=1,
            durationMs=85_000,
        )


def running_log(run_id: str = RUN_ID) -> EventWriter:
    """Two finished iterations and a third one mid-way (stage IMPLEMENT, a task running)."""
    log = EventWriter(run_id)
    log.add(
        "armed",
        label="demo",
        maxIterations=10,
        minIterations=1,
        agent="claude",
        model="claude-sonnet-4-5",
    )
    log.add("driver_start", pid=4242, agent="claude", verifiedVersion="2.1.197")
    log.iteration(1, (2000, 200), 0.01, "1a2b3c4d5e6f7a8b9c0d")
    log.iteration(2, (5500, 480), 0.025, "a1b2c3d4e5f60718293a")
    log.add("iteration_start", iteration=3)
    log.add("workitem_start", iteration=3, kind="issue", ref=12, title="Fix the login redirect")
    log.add("stage_plan", iteration=3, stages=["ORIENT", "IMPLEMENT", "TEST", "COMMIT"])
    log.add("stage_start", iteration=3, stage=1, stageName="ORIENT")
    log.add("stage_end", 30_000, iteration=3, stage=1, stageName="ORIENT", outcome="ok")
    log.add("stage_start", iteration=3, stage=2, stageName="IMPLEMENT")
    log.add("task_list", iteration=3, stage="IMPLEMENT", items=["add a test", "fix it", "docs"])
    log.add("task_start", iteration=3, stage="IMPLEMENT", sub=1, desc="add a test")
    log.add("task_end", iteration=3, stage="IMPLEMENT", sub=1, outcome="ok")
    log.add("task_start", iteration=3, stage="IMPLEMENT", sub=2, desc="fix it")
    log.add("substage", iteration=3, sub=1, verb="Read", argsSummary="src/login.py", outcome="ok")
    log.add("substage", iteration=3, sub=2, verb="Edit", argsSummary="src/login.py", outcome="ok")
    log.add(
        "substage", iteration=3, sub=3, verb="Bash", argsSummary="pytest -q tests/test_login.py"
    )
    return log


def agent_output(cwd: str = "/work/project") -> list[str]:
    """Claude Code stream-json lines of an iteration in progress."""
    stream = StreamJson("5f0c6a2e-0000-4000-8000-000000000001", cwd)
    return [
        stream.init(),
        stream.text("I'll look at the login redirect first."),
        stream.tool_use("toolu_1", "Read", {"file_path": f"{cwd}/src/login.py"}),
        stream.tool_result("toolu_1", "def login(request):\n    return redirect('/home')\n" * 20),
        stream.tool_use("toolu_2", "Bash", {"command": "pytest -q tests/test_login.py"}),
        stream.tool_result("toolu_2", "1 failed, 12 passed in 0.84s"),
        stream.text("The test fails as expected; now the fix."),
        "this line is not JSON",
    ]


def write_run(
    root: Path,
    state: dict[str, Any],
    events: list[dict[str, Any]] | None,
    *,
    output: dict[int, list[str]] | None = None,
    index: bool = True,
) -> Path:
    """Write a run folder: state.json, events.jsonl (None: no log yet), iter-NNNN/stdout.log."""
    folder = root / str(state["runId"])
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "state.json").write_text(json.dumps(state, indent=2) + "\n")
    if events is not None:
        lines = "".join(json.dumps(e, separators=(",", ":")) + "\n" for e in events)
        (folder / "events.jsonl").write_text(lines)
    for number, lines_out in (output or {}).items():
        iteration = folder / f"iter-{number:04d}"
        iteration.mkdir(exist_ok=True)
        (iteration / "stdout.log").write_text("".join(line + "\n" for line in lines_out))
    if index and events:
        armed = next((e for e in events if e["type"] == "armed"), None)
        if armed is not None:
            append_index_row(root, armed)
    return folder


def append_lines(path: Path, data: str) -> None:
    """Append raw text to a file (for torn and growing logs)."""
    with path.open("a", encoding="utf-8") as handle:
        handle.write(data)
        handle.flush()
