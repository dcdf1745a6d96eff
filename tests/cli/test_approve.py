"""``autopilot run --backlog --approve``: the approved run boundary written, shown and
honoured end to end (the demo agent as a real process)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import read_jsonl, run_cli

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
