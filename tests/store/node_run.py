"""What the Node implementation writes for a run (``docs/formats.md``,
"Runs written by the Node implementation"): its ``state.json``."""

from __future__ import annotations

RUN_ID = "ralph-tui-prompt-1714600000000"
STARTED = 1714600000000


def node_state(**changes: object) -> dict[str, object]:
    """A completed run's ``state.json`` as the Node implementation writes it (no
    ``status``, ``config``, ``spend`` or ``agent``), with ``changes``."""
    state: dict[str, object] = {
        "version": 9,
        "runId": RUN_ID,
        "mode": "prompt",
        "contextMode": "fresh",
        "resetOn": "iter",
        "startedAt": STARTED,
        "max": 5,
        "min": 1,
        "iter": 2,
        "paused": False,
        "stopRequested": False,
        "terminated": True,
        "terminationReason": "complete",
        "sessionId": None,
        "totalPausedMs": 0,
    }
    state.update(changes)
    return state
