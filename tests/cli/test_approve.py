"""``autopilot run --backlog --approve``: the approved run boundary written, shown and
honoured end to end (the demo agent as a real process)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.cli.test_control import _wait_for
from tests.conftest import FakeAgent, read_jsonl, run_cli

ITEM = {
    "id": "notes",
    "prompt": "Write notes.md: The notes. More notes.",
    "acceptance_criteria": [{"id": "ac1", "text": "exists", "check": "test -f notes.md"}],
}


def _backlog(repo: Path) -> None:
    (repo / ".autopilot").mkdir()
    (repo / ".autopilot" / "tasks.jsonl").write_text(json.dumps(ITEM) + "\n")


def test_an_approved_run_outside_its_surface_ends_when_its_steps_are_spent(
    tmp_path: Path, repo: Path
) -> None:
    _backlog(repo)
    args = ["run", "--backlog", "--agent", "demo", "--plain", "--max-iterations", "2"]
    env = {"AUTOPILOT_DEMO_DELAY": "0"}
    done = run_cli([*args, "--approve", "--surface", "docs/..."], cwd=repo, env=env)
    assert done.returncode == 3, done.stdout + done.stderr
    assert "approved run boundary: 2 steps, allowed surfaces docs/..." in done.stdout
    boundary = json.loads((repo / ".autopilot" / "approved-run.json").read_text())
    assert boundary["budget"]["remaining_steps"] == 0
    assert boundary["allowed_surfaces"] == ["docs/..."]
    folder = next(p for p in (tmp_path / "runs").iterdir() if p.is_dir() and p.name[0] != ".")
    events = read_jsonl(folder / "events.jsonl")
    violations = [e["paths"] for e in events if e["type"] == "surface_violation"]
    assert violations and all("notes.md" in paths for paths in violations)
    ended = [(e["type"], e["reason"]) for e in events if e["type"] in ("complete", "abort")]
    assert ended == [("abort", "max_iterations")]
    # Nothing in the work tree was reverted.
    assert (repo / "notes.md").exists()


def test_a_boundary_not_in_force_refuses_the_run(repo: Path) -> None:
    _backlog(repo)
    (repo / ".autopilot" / "approved-run.json").write_text('{"approved": false}\n')
    done = run_cli(["run", "--backlog", "--agent", "demo", "--plain"], cwd=repo)
    assert done.returncode == 2
    assert "approved-run.json is not in force (approved is not true;" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_approve_needs_a_backlog(repo: Path) -> None:
    done = run_cli(["run", "-p", "x", "--approve"], cwd=repo)
    assert done.returncode == 2
    assert done.stderr.strip().endswith("--approve and --surface are for backlog runs (--backlog)")


def test_a_refused_second_approve_leaves_the_active_runs_boundary_alone(
    tmp_path: Path, repo: Path, fake_agent: FakeAgent
) -> None:
    _backlog(repo)
    env = fake_agent([[{"shell": "while [ ! -f ../go ]; do sleep 0.05; done"}, {"result": "ok"}]])
    args = ["run", "--backlog", "--plain", "--approve", "--max-iterations", "2"]
    first = subprocess.Popen(
        [sys.executable, "-m", "autopilot", *args, "--surface", "notes.md"],
        cwd=repo,
        env={**os.environ, **env},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        boundary = repo / ".autopilot" / "approved-run.json"
        _wait_for(lambda: (tmp_path / "runs").exists() and _iteration_started(tmp_path))
        before = boundary.read_bytes()
        second = run_cli([*args[:-1], "50", "--surface", "src/..."], cwd=repo, env=env)
        assert second.returncode == 4 and "another run" in second.stderr, second.stderr
        assert boundary.read_bytes() == before
    finally:
        (tmp_path / "go").touch()
        first.wait(timeout=120)


def _iteration_started(tmp_path: Path) -> bool:
    return any(
        e["type"] == "iteration_start"
        for folder in (tmp_path / "runs").iterdir()
        if (folder / "events.jsonl").exists()
        for e in read_jsonl(folder / "events.jsonl")
    )


def test_a_surface_outside_the_project_is_refused_in_one_line(repo: Path) -> None:
    _backlog(repo)
    args = ["run", "--backlog", "--agent", "demo", "--approve", "--surface", "/etc/passwd"]
    done = run_cli(args, cwd=repo)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "autopilot: error: --surface: '/etc/passwd' is not relative to the project; a surface "
        "is a path or glob relative to the project root"
    ]
    assert not (repo / ".autopilot" / "approved-run.json").exists()


def test_a_backlog_run_says_its_item_attempts_and_check_timeout_at_the_start(repo: Path) -> None:
    _backlog(repo)
    args = ["run", "--backlog", "--agent", "demo", "--plain", "--max-iterations", "1"]
    limits = ["--max-item-attempts", "2", "--check-timeout", "90s"]
    done = run_cli([*args, *limits], cwd=repo, env={"AUTOPILOT_DEMO_DELAY": "0"})
    assert (
        "autopilot: work items: 2 attempts each (max-item-attempts), check timeout 1.5m "
        "(check-timeout)\n" in done.stdout
    ), done.stdout + done.stderr
