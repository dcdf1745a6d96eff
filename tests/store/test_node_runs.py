"""Runs written by the Node implementation, in the same runs root.

Their files follow the Node tool's own writer (``docs/formats.md``, "Runs written
by the Node implementation"): a ``state.json`` without ``status``, ``config``,
``spend`` or ``agent``; terminal reasons such as ``complete``; an index row without
``ts``; events without ``costUsd``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.store.node_run import RUN_ID, STARTED, node_state


def _node_events() -> list[dict[str, object]]:
    base = {"runId": RUN_ID}
    return [
        {"type": "armed", "ts": STARTED, **base, "label": "ralph-tui-prompt", "maxIterations": 5},
        {"type": "iteration_start", "ts": STARTED + 10, **base, "iteration": 1},
        {
            "type": "iteration_end",
            "ts": STARTED + 20,
            **base,
            "iteration": 1,
            "excerpt": "working",
            "tokens": {"input": 0, "output": 17},
        },
        {"type": "iteration_start", "ts": STARTED + 30, **base, "iteration": 2},
        {
            "type": "iteration_end",
            "ts": STARTED + 40,
            **base,
            "iteration": 2,
            "excerpt": "COMPLETE",
            "tokens": {"input": 0, "output": 39},
        },
        {"type": "complete", "ts": STARTED + 50, **base, "reason": "complete"},
    ]


@pytest.fixture
def node_run(tmp_path: Path) -> Path:
    """A runs root holding one completed run as the Node implementation writes it."""
    root = tmp_path / "runs"
    folder = root / RUN_ID
    folder.mkdir(parents=True)
    (folder / "state.json").write_text(json.dumps(node_state(), indent=2) + "\n")
    lines = [json.dumps(event, separators=(",", ":")) for event in _node_events()]
    (folder / "events.jsonl").write_text("\n".join(lines) + "\n")
    row = {
        "type": "armed",
        "runId": RUN_ID,
        "label": "ralph-tui-prompt",
        "startedAt": STARTED,
        "maxIterations": 5,
        "minIterations": 1,
    }
    (root / "index.jsonl").write_text(json.dumps(row) + "\n")
    return root


def test_list_shows_a_node_run_as_completed(node_run: Path, tmp_path: Path) -> None:
    done = run_cli(["list"], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    line = next(line for line in done.stdout.splitlines() if RUN_ID in line)
    assert line.endswith("completed (complete)")
    assert "iter 2/5" in line


def test_status_reads_a_node_run(node_run: Path, tmp_path: Path) -> None:
    done = run_cli(["status", RUN_ID], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "None" not in done.stdout
    lines = dict(line.split(None, 1) for line in done.stdout.splitlines())
    assert lines["status"] == "completed (complete)"
    assert lines["agent"] == "copilot"
    assert lines["iteration"] == "2 of 5 (2 spent)"
    assert lines["directory"].startswith("unknown")


def test_stats_counts_a_node_runs_tokens_from_its_log(node_run: Path, tmp_path: Path) -> None:
    done = run_cli(["stats", "--json"], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    totals = json.loads(done.stdout)
    assert totals["tokens"] == {"input": 0, "output": 39}


def test_a_run_folder_with_a_log_and_no_state_still_replays(node_run: Path, tmp_path: Path) -> None:
    (node_run / RUN_ID / "state.json").unlink()
    done = run_cli(["replay", RUN_ID[:20]], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1].startswith(f"-- {RUN_ID}: completed (complete),")
    assert "tokens 0/39" in done.stdout.splitlines()[-1]


def test_start_refuses_a_node_run_in_one_line(node_run: Path, tmp_path: Path) -> None:
    folder = node_run / RUN_ID
    (folder / "state.json").write_text(
        json.dumps(node_state(terminated=False, terminationReason=None))
    )
    lines = [json.dumps(event) for event in _node_events()[:-1]]
    (folder / "events.jsonl").write_text("\n".join(lines) + "\n")
    done = run_cli(["start", RUN_ID, "--plain"], cwd=tmp_path)
    assert done.returncode == 2
    assert "another implementation" in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
