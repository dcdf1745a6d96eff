"""What an agent can do to the driver from where it runs: write into the run's log,
plant git configuration in the work tree, leave processes behind."""

from __future__ import annotations

from pathlib import Path

from autopilot.store.events import read_events
from tests.cli.test_control import _run_dir
from tests.conftest import FakeAgent, run_cli


def test_a_half_line_the_agent_appends_to_the_log_glues_nothing(
    tmp_path: Path, repo: Path, fake_agent: FakeAgent
) -> None:
    # Written after the agent's last tool call, so the next event is its iteration_end.
    log = '"$AUTOPILOT_RUNS_DIR/$AUTOPILOT_RUN_ID/events.jsonl"'
    half = f"""(sleep 0.5; printf '{{"type":"iteration_end","ts":1,"iterat' >> {log}) >/dev/null 2>&1 &"""
    env = fake_agent([[{"shell": half}, {"sleep": 1.0}, {"result": "step"}]])
    done = run_cli(
        ["run", "-p", "x", "--max-iterations", "3", "--stagnation-limit", "0", "--plain"],
        cwd=repo,
        env=env,
    )
    assert done.returncode == 3, done.stdout + done.stderr
    events = list(read_events(_run_dir(tmp_path) / "events.jsonl"))
    for kind in ("iteration_start", "session_attached", "usage_update", "iteration_end"):
        assert [e["iteration"] for e in events if e["type"] == kind] == [1, 2, 3], kind
    assert [e["reason"] for e in events if e["type"] == "abort"] == ["max_iterations"]
