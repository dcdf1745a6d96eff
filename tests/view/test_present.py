"""The live view's badge speaks the one run-status vocabulary (``RunStatus``)."""

from __future__ import annotations

import pytest

from autopilot.core.vocabulary import TERMINAL_STATUSES, RunStatus
from autopilot.store.snapshot import Snapshot
from autopilot.view.badge import run_status, status_badge

NOW_MS = 1_800_000_000_000
WORDS = {RunStatus.RATE_LIMITED: "RATE LIMITED", RunStatus.AWAITING_USER: "AWAITING USER"}


@pytest.mark.parametrize("status", [s for s in RunStatus if s not in TERMINAL_STATUSES])
def test_each_run_status_of_a_live_run_is_its_own_badge(status: RunStatus) -> None:
    snapshot = Snapshot()
    snapshot.status = "running"
    badge = status_badge({"status": status.value}, snapshot, True, NOW_MS)
    assert badge.label == WORDS.get(status, status.value.upper())


def test_a_status_this_version_does_not_know_falls_back_to_the_logs() -> None:
    snapshot = Snapshot()
    snapshot.status = "paused"
    state = {"status": "exploded"}
    assert run_status(state, snapshot) is RunStatus.PAUSED
    assert status_badge(state, snapshot, True, NOW_MS).label == "PAUSED"
