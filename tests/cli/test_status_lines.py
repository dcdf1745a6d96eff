"""What ``status`` says of undelivered messages and blocked work items."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from autopilot.cli.control_body import blocked_lines, messages_text
from autopilot.store.run_state import RunState


@pytest.mark.parametrize(
    ("user", "pending", "terminated", "text"),
    [
        (1, 1, True, "1 of yours never delivered (the run ended first)"),
        # autopilot's own notice (a reopened item) is moot once the run ended.
        (0, 1, True, None),
        (1, 2, True, "1 of yours never delivered (the run ended first)"),
        (1, 3, False, "1 of yours and 2 autopilot notices waiting for the next iteration"),
        (0, 1, False, "1 autopilot notice waiting for the next iteration"),
        (0, 0, False, None),
    ],
)
def test_status_tells_the_users_messages_from_autopilots_notices(
    user: int, pending: int, terminated: bool, text: str | None
) -> None:
    state = RunState(terminated=terminated)
    assert messages_text(user, pending, state) == text


def test_status_names_a_backlog_runs_blocked_items_and_why(tmp_path: Path) -> None:
    (tmp_path / ".autopilot").mkdir()
    lines = [
        {"id": "a", "prompt": "x", "status": "completed"},
        {"id": "b", "prompt": "y", "status": "blocked", "blocked_reason": "3 attempts failed"},
    ]
    (tmp_path / ".autopilot" / "tasks.jsonl").write_text(
        "".join(json.dumps(line) + "\n" for line in lines)
    )
    state = RunState(mode="backlog", cwd=str(tmp_path))
    assert blocked_lines(state) == ["blocked    b: 3 attempts failed"]
    assert blocked_lines(RunState(mode="prompt", cwd=str(tmp_path))) == []
    (tmp_path / ".autopilot" / "tasks.jsonl").write_bytes(b"\xff not json\n")
    assert blocked_lines(state) == []
