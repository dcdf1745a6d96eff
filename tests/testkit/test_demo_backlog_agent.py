"""The demo agent drains a backlog through autopilot report (no driver: the shell alone)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from autopilot.config import RunConfig
from autopilot.core.workitems import ItemStatus
from autopilot.loop.arming import PromptSource, arm_run
from autopilot.loop.backlog import BacklogShell
from autopilot.loop.clock import SystemClock
from autopilot.store.backlog import Backlog
from autopilot.store.paths import run_dir, runs_root
from autopilot.testkit.demo_backlog_agent import read_continuation
from tests.conftest import git

ITEMS = [
    {
        "id": "overview",
        "title": "Overview",
        "prompt": "Write docs/overview.md.",
        "acceptance_criteria": [
            {"id": "ac1", "text": "it exists", "check": "test -s docs/overview.md"}
        ],
    },
    {
        "id": "config",
        "title": "Config",
        "depends_on": ["overview"],
        "prompt": "Describe the configuration in docs/config.md; mention config.toml.",
        "acceptance_criteria": [
            {
                "id": "ac1",
                "text": "names config.toml",
                "check": "grep -q config.toml docs/config.md",
            }
        ],
    },
]


def test_the_demo_agent_reports_and_a_failing_check_reopens_once(repo: Path) -> None:
    (repo / ".autopilot").mkdir()
    (repo / ".autopilot" / "tasks.jsonl").write_text("".join(json.dumps(i) + "\n" for i in ITEMS))
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "backlog")
    root = runs_root()
    run_id = arm_run(
        root, RunConfig(agent="demo"), PromptSource(text="backlog"), repo, SystemClock()
    )
    events: list[dict[str, Any]] = []
    shell = BacklogShell(
        Backlog(repo, root / ".locks"),
        run_id,
        run_dir(root, run_id),
        lambda event_type, **fields: events.append({"type": event_type, **fields}),
    )
    env = dict(os.environ, AUTOPILOT_RUN_ID=run_id, AUTOPILOT_DEMO_DELAY="0")
    outcomes = []
    for iteration in range(1, 5):
        begun = shell.begin(iteration)
        if begun.done:
            break
        assert begun.prompt is not None
        done = subprocess.run(
            [sys.executable, "-m", "autopilot.testkit.demo_agent"],
            cwd=repo,
            env=env,
            input=begun.prompt,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        assert "recorded continue_next" in done.stdout
        ended = shell.end(iteration, repo, [], repo)
        assert ended is not None
        outcomes.append((ended.item.id, ended.item.status))
    assert outcomes == [
        ("overview", ItemStatus.COMPLETED),
        ("config", ItemStatus.REOPENED),
        ("config", ItemStatus.COMPLETED),
    ]
    assert "config.toml" in (repo / "docs" / "config.md").read_text()
    assert [e["type"] for e in events].count("workitem_start") == 3


def test_read_continuation_ignores_other_prompts() -> None:
    assert read_continuation("Work through BACKLOG.md") is None
    item = read_continuation(
        "[autopilot]\nrun: r\nwork-item: x\nfocus-layer: micro\nattempt: 2\n"
        "allowed-surface:\n- any path\nacceptance-criteria:\n- ac1: a\n- tests: b [check: t]\n"
        "before-stop:\n- report\nprompt:\nDo x.\n"
    )
    assert item is not None
    assert (item.item_id, item.attempt, item.criteria, item.prompt) == (
        "x",
        2,
        ("ac1", "tests"),
        "Do x.",
    )
