"""A run is never relaunched from a shell that lacks the agent's variables it started
with (its agent would not be logged in): ``start`` refuses in one line and leaves the
run as it was; ``relaunch`` (bare ``autopilot``, the login service) and ``send`` skip
it, saying why."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from autopilot.store.paths import runs_root
from autopilot.store.state import encode_state, read_state
from tests.cli.test_launch import _arm, _processes, agent  # noqa: F401
from tests.conftest import run_cli

KEY = "AUTOPILOT_TEST_AGENT_KEY"


def _started_with_key(repo: Path) -> tuple[str, Path]:
    """A run whose agent started with ``KEY`` (its daemon since gone)."""
    run_id = _arm(repo)
    path = runs_root() / run_id / "state.json"
    state = read_state(path)
    state.agent_env = (KEY,)
    path.write_bytes(encode_state(state))
    return run_id, path


def test_start_from_a_shell_without_the_agents_variables_refuses(
    agent: Any,  # noqa: F811
    repo: Path,
) -> None:
    run_id, path = _started_with_key(repo)
    before = path.read_bytes()
    refused = run_cli(["start", run_id], cwd=repo)
    assert refused.returncode == 2
    assert refused.stderr.strip() == (
        f"autopilot: error: run {run_id}'s agent started with {KEY}, which this shell lacks: "
        f"its agent would not be logged in; export {KEY} (or start it from the shell it "
        f"ran in), or autopilot start --env-missing-ok {run_id} to go on without"
    )
    assert path.read_bytes() == before
    assert _processes("autopilot.runtime.supervisor", run_id) == []
    # From a shell that has it, the run goes on.
    started = run_cli(["start", run_id], cwd=repo, env={KEY: "k"})
    assert started.returncode == 0, started.stderr
    assert f"relaunching {run_id}" in started.stdout
    assert len(_processes("autopilot.runtime.supervisor", run_id)) == 1


def test_start_with_env_missing_ok_goes_on_without_them(
    agent: Any,  # noqa: F811
    repo: Path,
) -> None:
    run_id, _ = _started_with_key(repo)
    started = run_cli(["start", "--env-missing-ok", run_id], cwd=repo)
    assert started.returncode == 0, started.stderr
    assert len(_processes("autopilot.runtime.supervisor", run_id)) == 1


def test_relaunch_and_send_skip_a_run_whose_agent_would_not_be_logged_in(
    agent: Any,  # noqa: F811
    repo: Path,
) -> None:
    run_id, path = _started_with_key(repo)
    relaunched = run_cli(["relaunch"], cwd=repo)
    assert relaunched.returncode == 0, relaunched.stderr
    why = (
        f"its agent started with {KEY}, which this environment lacks (its agent would not "
        "be logged in): autopilot start it from a shell that has it"
    )
    assert relaunched.stdout.splitlines() == [
        f"autopilot: not relaunching {run_id}: {why}",
        "autopilot: no run to relaunch",
    ]
    sent = run_cli(["send", run_id, "hello"], cwd=repo)
    assert sent.returncode == 0, sent.stderr
    assert f"no daemon is running {run_id} ({why})" in sent.stdout
    assert _processes("autopilot.runtime.supervisor", run_id) == []
    assert read_state(path).pid is None
