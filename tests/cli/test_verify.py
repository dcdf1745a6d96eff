"""``--verify CMD`` and ``verify = [...]``: where the commands come from, and a run that
refuses a false completion end to end (the fake agent as a real process)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from autopilot.config import RunConfig
from autopilot.config_sources import build_config
from autopilot.errors import StateFileError, UsageError
from tests.conftest import FakeAgent, read_jsonl, run_cli


def test_verify_commands_come_from_flags_environment_or_a_config_list(tmp_path: Path) -> None:
    (tmp_path / ".autopilot").mkdir()
    (tmp_path / ".autopilot" / "config.toml").write_text(
        'verify = ["pytest -q", "ruff check src tests"]\n'
    )
    assert build_config({}, project=tmp_path, environ={}).verify == (
        "pytest -q",
        "ruff check src tests",
    )
    env = {"AUTOPILOT_VERIFY": "make test"}
    assert build_config({}, project=tmp_path, environ=env).verify == ("make test",)
    # --verify given twice: one command per flag, spaces kept.
    flags = {"verify": "make lint\nmake test FAST=1"}
    assert build_config(flags, project=tmp_path, environ=env).verify == (
        "make lint",
        "make test FAST=1",
    )
    config = RunConfig(verify=("make test",))
    assert RunConfig.from_json(config.to_json()).verify == ("make test",)
    assert config.policy().verify and not config.policy("backlog").verify
    assert not RunConfig().policy().verify


@pytest.mark.parametrize("text", ["verify = [1, 2]\n", 'verify = ["   "]\n'])
def test_a_bad_verify_setting_is_one_line(tmp_path: Path, text: str) -> None:
    (tmp_path / ".autopilot").mkdir()
    (tmp_path / ".autopilot" / "config.toml").write_text(text)
    with pytest.raises(UsageError, match="verify"):
        build_config({}, project=tmp_path, environ={})


def test_a_corrupt_verify_in_state_json_is_refused() -> None:
    with pytest.raises(StateFileError, match=r"config\.verify"):
        RunConfig.from_json({"verify": "make test"})


def test_run_refuses_a_false_completion_until_the_verify_command_passes(
    tmp_path: Path, repo: Path, fake_agent: FakeAgent
) -> None:
    env = fake_agent(
        [
            [{"write_file": "a.txt", "content": "a"}, {"result": "All done.\n\nCOMPLETE"}],
            [
                {"write_file": "done.txt", "content": "ok"},
                {"result": "Fixed.\n\nCOMPLETE"},
            ],
        ]
    )
    check = "test -f done.txt || { echo done.txt is missing; exit 1; }"
    done = run_cli(["run", "-p", "make done.txt", "--verify", check], cwd=repo, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"a completion promise counts once these pass: {check}" in done.stdout
    folder = next(p for p in (tmp_path / "runs").iterdir() if p.is_dir() and p.name[0] != ".")
    events = read_jsonl(folder / "events.jsonl")
    assert [(e["iteration"], e["passed"]) for e in events if e["type"] == "verify"] == [
        (1, False),
        (2, True),
    ]
    assert [(e["type"], e["reason"]) for e in events if e["type"] in ("complete", "abort")] == [
        ("complete", "completion_promise")
    ]
    state = json.loads((folder / "state.json").read_text())
    assert state["spend"]["iterations"] == 2 and state["config"]["verify"] == [check]
    # The second prompt carried the failure.
    assert "done.txt is missing" in (folder / "iter-0002" / "prompt.md").read_text()
    assert (folder / "iter-0001" / "check-verify1.log").read_text() == "done.txt is missing\n"


def test_verify_is_refused_with_backlog(tmp_path: Path, repo: Path) -> None:
    done = run_cli(["run", "--backlog", "--verify", "make test"], cwd=repo)
    assert done.returncode == 2
    assert done.stderr.strip().endswith(
        "--verify is for prompt runs: a backlog item's criteria carry checks"
    )
