"""``--self-improve``, ``--grow-project`` and ``--focus`` end to end (the fake agent as a
real process): the baked prompt sent, its tokens in force, its name on the run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import FakeAgent, read_jsonl, run_cli


def _folder(tmp_path: Path) -> Path:
    return next(p for p in (tmp_path / "runs").iterdir() if p.is_dir() and p.name[0] != ".")


def test_self_improve_sends_the_baked_prompt_with_its_focus_and_abort_token(
    tmp_path: Path, repo: Path, fake_agent: FakeAgent
) -> None:
    env = fake_agent([[{"result": "Nothing left to improve.\n\nABORT_NO_IMPROVEMENTS"}]])
    done = run_cli(["run", "--self-improve", "--focus", "the README"], cwd=repo, env=env)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "abort promise ABORT_NO_IMPROVEMENTS" in done.stdout
    folder = _folder(tmp_path)
    assert folder.name.startswith("self-improve-")
    prompt = (folder / "iter-0001" / "prompt.md").read_text()
    assert "Focus on this, and only this: the README" in prompt
    assert "[STAGE_PLAN: ORIENT, IDEATE" in prompt
    state = json.loads((folder / "state.json").read_text())
    assert (state["mode"], state["config"]["abort_promise"]) == (
        "self-improve",
        "ABORT_NO_IMPROVEMENTS",
    )
    ends = [(e["type"], e.get("reason")) for e in read_jsonl(folder / "events.jsonl")]
    assert ("abort", "abort_promise") in ends


def test_grow_project_keeps_a_given_abort_promise(
    tmp_path: Path, repo: Path, fake_agent: FakeAgent
) -> None:
    env = fake_agent([[{"result": "Added items.\n\nCOMPLETE"}]])
    args = ["run", "--grow-project", "--abort-promise", "GIVE_UP"]
    done = run_cli(args, cwd=repo, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    state = json.loads((_folder(tmp_path) / "state.json").read_text())
    assert (state["mode"], state["config"]["abort_promise"]) == ("grow-project", "GIVE_UP")
    assert "autopilot tasks add" in (_folder(tmp_path) / "iter-0001" / "prompt.md").read_text()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--self-improve", "-p", "x"], "give exactly one of -p TEXT, -f FILE, --backlog"),
        (["--self-improve", "--grow-project"], "give exactly one of"),
        (["-p", "x", "--focus", "docs"], "--focus goes with --self-improve or --grow-project"),
        (["--self-improve", "--focus", " "], "--focus must be 1-500 characters of text"),
    ],
)
def test_bad_combinations_are_one_line(repo: Path, args: list[str], message: str) -> None:
    done = run_cli(["run", *args], cwd=repo)
    assert done.returncode == 2
    assert message in done.stderr and len(done.stderr.strip().splitlines()) == 1
