"""Session ids: each adapter knows its CLI's shape, and nothing else passes."""

from __future__ import annotations

import pytest

from autopilot.agents.base import SESSION_ID_MAX_CHARS
from autopilot.agents.registry import make_adapter

# Real ids from the captured streams (tests/data/captured-streams/).
REAL_IDS = {
    "claude": "eab24a57-a0dc-4669-98eb-2837131cf8d3",
    "codex": "01a22b71-8fe7-7a43-8a4e-620fbc93ca16",
    "pi": "01a22b86-0290-774a-9785-93c3a1411c9c",
    "gemini": "b3fdf468-c312-4448-8df7-95099b95bca6",
    "copilot": "e6739824-5de1-4a07-8999-d8f01633c04b",
    "opencode": "ses_dd47b8f11ffei6FPhEN6YmJz3N",
}
NOT_IDS = [
    "",
    "-rf",
    "--dangerously-skip-permissions",
    "../../etc/passwd",
    "eab24a57-a0dc-4669-98eb-2837131cf8d3 --model x",
    "eab24a57-a0dc-4669-98eb-2837131cf8d3\n",
    "ses_dd47b8f11ffei6FPhEN6YmJz3N;rm",
    "latest",
    "x" * (SESSION_ID_MAX_CHARS + 1),
]


@pytest.mark.parametrize("name", sorted(REAL_IDS))
def test_real_session_ids_are_valid(name: str) -> None:
    assert make_adapter(name).valid_session_id(REAL_IDS[name]) is True


@pytest.mark.parametrize("name", sorted(REAL_IDS))
@pytest.mark.parametrize("text", NOT_IDS)
def test_anything_else_is_not_a_session_id(name: str, text: str) -> None:
    assert make_adapter(name).valid_session_id(text) is False


def test_one_clis_shape_is_not_anothers() -> None:
    assert make_adapter("claude").valid_session_id(REAL_IDS["opencode"]) is False
    assert make_adapter("opencode").valid_session_id(REAL_IDS["claude"]) is False


@pytest.mark.parametrize("name", ["aider", "command"])
def test_agents_without_sessions_accept_none(name: str) -> None:
    adapter = make_adapter(name, command=("true",))
    assert adapter.supports_sessions is False
    assert adapter.valid_session_id(REAL_IDS["claude"]) is False
