"""autopilot demo drains its three-item backlog through a real --backlog run."""

from __future__ import annotations

import json
from pathlib import Path

from autopilot.store.events import read_events
from autopilot.store.fold import fold
from autopilot.view.present import work_item_lines
from tests.conftest import run_cli


def test_the_demo_drains_its_backlog_with_one_reopen(tmp_path: Path) -> None:
    repo = tmp_path / "demo"
    done = run_cli(
        ["demo", "--plain", "--dir", str(repo)],
        cwd=tmp_path,
        env={"AUTOPILOT_DEMO_DELAY": "0"},
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "completed (backlog_done)" in done.stdout
    tasks = [
        json.loads(line) for line in (repo / ".autopilot" / "tasks.jsonl").read_text().splitlines()
    ]
    assert [(t["id"], t["status"], t["attempt"]) for t in tasks] == [
        ("overview", "completed", 1),
        ("config", "completed", 2),
        ("release", "completed", 1),
    ]
    folder = next((tmp_path / "runs").glob("demo-*"))
    snapshot = fold(read_events(folder / "events.jsonl"))
    assert [item["status"] for item in snapshot.workItems] == ["completed"] * 3
    assert work_item_lines(snapshot) == [
        ("overview Write the project overview", "completed"),
        ("config Describe the configuration file (attempt 2)", "completed"),
        ("release List the release steps", "completed"),
    ]
    assert snapshot.reason == "backlog_done"
    assert snapshot.recentTasks or snapshot.recentStages
