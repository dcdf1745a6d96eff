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


def test_a_run_held_by_the_off_switch_says_so_and_how_to_release_it() -> None:
    snapshot = Snapshot()
    off = "/work/project/.autopilot/OFF"
    held = status_badge({"status": "paused"}, snapshot, True, NOW_MS, off=off)
    assert (held.label, held.detail) == ("PAUSED", f"held by {off}: `autopilot on` releases it")
    both = status_badge({"status": "paused", "paused": True}, snapshot, True, NOW_MS, off=off)
    assert both.detail == f"held by {off}: `autopilot on` releases it, then r resumes"
    coming = status_badge({"status": "running"}, snapshot, True, NOW_MS, off=off)
    assert coming.label == "PAUSING" and "autopilot on" in coming.detail
    assert status_badge({"status": "paused"}, snapshot, True, NOW_MS).detail == "r resumes"
