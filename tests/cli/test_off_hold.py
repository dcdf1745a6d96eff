"""A run held by the project's OFF switch says so, and how to release it, in ``status``
and ``list`` — not a plain "paused" a person would try to ``resume``."""

from __future__ import annotations

from pathlib import Path

from tests.cli.test_control import SLOW_ITERATION, _run_dir, _start, _state, _wait_for
from tests.conftest import FakeAgent, run_cli


def test_status_and_list_name_the_off_file_holding_a_run(
    tmp_path: Path, repo: Path, fake_agent: FakeAgent
) -> None:
    env = fake_agent([SLOW_ITERATION] * 50)
    proc = _start(repo, env, "--max-iterations", "50", "--stagnation-limit", "0")
    try:
        folder = _run_dir(tmp_path)
        assert run_cli(["off"], cwd=repo).returncode == 0
        off = repo / ".autopilot" / "OFF"
        _wait_for(lambda: _state(folder).get("status") == "paused", 60)
        held = f"held by {off}: `autopilot on` releases it"
        status = run_cli(["status", folder.name], cwd=repo)
        assert f"status     paused — {held}" in status.stdout
        listed = run_cli(["list"], cwd=repo)
        [row] = [line for line in listed.stdout.splitlines() if folder.name in line]
        assert held in row
        assert run_cli(["on"], cwd=repo).returncode == 0
        _wait_for(lambda: _state(folder).get("status") == "running", 60)
        assert "held by" not in run_cli(["status", folder.name], cwd=repo).stdout
    finally:
        proc.kill()
        proc.wait()
