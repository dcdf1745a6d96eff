"""``autopilot stats`` (``docs/formats.md``, "Terminal reasons") and ``autopilot doctor``."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from autopilot.manage.doctor import Level, check_agents, check_index, check_runs
from autopilot.view.stats import aggregate, collect, last_terminal_event
from tests.conftest import run_cli
from tests.manage.runs import alive_driver, dead_driver, make_run, now_ms


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A runs root with runs of every outcome."""
    root = tmp_path / "runs"
    start = now_ms() - 10_000_000
    make_run(root, "docs", start, terminal=("complete", "completion_promise"), iterations=3)
    make_run(
        root,
        "docs",
        start + 1,
        terminal=("complete", "completion_promise"),
        iterations=5,
        tokens=(5000, 500),
        cost=0.5,
    )
    make_run(
        root, "api", start + 2, terminal=("abort", "max_iterations"), iterations=10, agent="codex"
    )
    make_run(root, "api", start + 3, iterations=2, state=alive_driver())
    make_run(root, "api", start + 4, iterations=1, state=dead_driver())
    make_run(root, "gone", start + 5, folder=False)
    return root


def test_stats_totals(root: Path) -> None:
    """Outcomes, labels, agents, iteration spread, tokens and cost over all runs."""
    totals = aggregate(collect(root))
    assert totals == {
        "runs": 6,
        "byOutcome": {
            "complete:completion_promise": 2,
            "abort:max_iterations": 1,
            "active": 1,
            "interrupted": 1,
            "missing": 1,
        },
        "byLabel": {"api": 3, "docs": 2, "gone": 1},
        "byAgent": {"claude": 5, "codex": 1},
        "iterations": {"min": 1, "median": 3, "max": 10, "total": 21},
        "tokens": {"input": 5400, "output": 540},
        "costUsd": 0.54,
    }


def test_stats_takes_the_last_terminal_row_of_the_log(root: Path) -> None:
    """As the Node tool's stats: the log's last complete/abort row decides, ``<type>`` alone
    when it has no reason, whatever state.json says."""
    run_id = make_run(root, "odd", now_ms(), terminal=("complete", "completion_promise"))
    log = root / run_id / "events.jsonl"
    with log.open("a") as handle:
        handle.write(json.dumps({"type": "abort", "ts": 1, "runId": run_id}) + "\n")
        handle.write("not json\n")
    assert last_terminal_event(log) == {"type": "abort", "ts": 1, "runId": run_id}
    assert aggregate(collect(root))["byOutcome"]["abort"] == 1


def test_stats_command(root: Path, tmp_path: Path) -> None:
    """Text and ``--json`` forms."""
    done = run_cli(["stats"], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "runs        6" in done.stdout
    assert "iterations  min 1 · median 3 · max 10 · total 21" in done.stdout
    assert "cost        $0.5400" in done.stdout
    as_json = json.loads(run_cli(["stats", "--json"], cwd=tmp_path).stdout)
    assert as_json["byOutcome"]["interrupted"] == 1


def test_stats_of_no_runs(tmp_path: Path) -> None:
    """No runs root yet: zero runs, exit 0."""
    done = run_cli(["stats", "--json"], cwd=tmp_path)
    assert done.returncode == 0
    assert json.loads(done.stdout)["runs"] == 0


def _fake_cli(folder: Path, name: str, body: str) -> None:
    folder.mkdir(exist_ok=True)
    path = folder / name
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)


def test_doctor_healthy(tmp_path: Path) -> None:
    """A writable root, git, consistent runs and index: exit 0; agent versions shown."""
    make_run(tmp_path / "runs", "docs", now_ms(), terminal=("complete", "completion_promise"))
    bin_dir = tmp_path / "bin"
    _fake_cli(bin_dir, "claude", 'echo "2.1.197 (Claude Code)"')
    env = {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    done = run_cli(["doctor"], cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stdout
    assert f"ok    agent claude     {bin_dir / 'claude'}: 2.1.197 (Claude Code)" in done.stdout
    assert "ok    runs             1 ended" in done.stdout
    assert done.stdout.splitlines()[-1] == "autopilot: healthy"


def test_doctor_finds_a_stale_run_and_a_broken_index(tmp_path: Path) -> None:
    """A run whose driver died unterminated, and a folder the index lacks: exit 1."""
    root = tmp_path / "runs"
    stale = make_run(root, "stale", now_ms(), state=dead_driver())
    make_run(root, "fine", now_ms() + 1, terminal=("abort", "x"))
    unlisted = root / "unlisted-1796000000000"
    unlisted.mkdir()
    (unlisted / "state.json").write_text(json.dumps({"runId": unlisted.name, "terminated": True}))
    done = run_cli(["doctor"], cwd=tmp_path)
    assert done.returncode == 1
    assert f"fail  run {stale}" in done.stdout and f"autopilot start {stale}" in done.stdout
    assert "1 run folders missing from index.jsonl" in done.stdout
    assert done.stdout.splitlines()[-1] == "autopilot: 2 findings"


def test_doctor_checks_in_parts(tmp_path: Path) -> None:
    """Agent CLIs that fail or hang are findings; a missing one is a note; index orphans."""
    bin_dir = tmp_path / "bin"
    _fake_cli(bin_dir, "codex", "sleep 30")
    _fake_cli(bin_dir, "pi", "echo broken >&2; exit 3")
    env = {"PATH": str(bin_dir)}
    findings = {f.subject: f for f in check_agents(env, timeout_seconds=0.5)}
    assert findings["agent codex"].level is Level.FAIL
    assert "no answer in 0.5 s" in findings["agent codex"].detail
    assert (
        findings["agent pi"].level is Level.FAIL
        and "exited 3: broken" in findings["agent pi"].detail
    )
    assert findings["agent claude"].level is Level.NOTE
    root = tmp_path / "runs"
    make_run(root, "gone", now_ms(), folder=False)
    make_run(root, "live", now_ms() + 1, state=alive_driver())
    assert [f.level for f in check_index(root)] == [Level.FAIL]
    assert [f.level for f in check_runs(root)] == [Level.OK]


def test_doctor_with_an_unusable_runs_root(tmp_path: Path) -> None:
    """A runs root that is a file: a finding, not a traceback."""
    (tmp_path / "file").write_text("")
    done = run_cli(["doctor"], cwd=tmp_path, env={"AUTOPILOT_RUNS_DIR": str(tmp_path / "file")})
    assert done.returncode == 1
    assert done.stdout.startswith("fail  runs root") and "Traceback" not in done.stderr
