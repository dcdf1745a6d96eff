"""``fold(events) -> Snapshot`` against the seed reader's rules (``docs/formats.md``, "Folding")."""

from __future__ import annotations

import copy
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autopilot.core.vocabulary import RunStatus
from autopilot.store.events import SEED_EVENT_TYPES, parse_event_line, read_events, serialize_event
from autopilot.store.fold import MAX_SNAPSHOT_HISTORY, Snapshot, fold

RUN = "ralph-tui-prompt-1700000000000"
EMOJI = "\U0001f600"

# The Node tool's createInitialSnapshot(), in its key order.
INITIAL: dict[str, Any] = {
    "runId": None,
    "label": None,
    "status": "idle",
    "iteration": 0,
    "maxIterations": None,
    "minIterations": None,
    "stagnationStreak": 0,
    "reason": None,
    "tokens": {"input": 0, "output": 0},
    "premiumRequests": None,
    "lastExcerpt": None,
    "startedAt": None,
    "updatedAt": None,
    "terminalAt": None,
    "sessionId": None,
    "iterations": [],
    "activeStage": None,
    "recentStages": [],
    "currentStageSubstages": [],
    "backlog": None,
    "activeWorkItem": None,
    "completedWorkItems": [],
    "closedByLoop": 0,
    "currentPlan": None,
    "planAmendments": [],
    "currentTaskList": None,
    "taskInFlight": None,
    "recentTasks": [],
    "lastCommit": None,
    "activeWorktree": None,
    "keptWorktrees": [],
    "keptWorktreeCount": 0,
    "currentStageSubstagesDropped": 0,
}


def ev(event_type: str, ts: int, **fields: Any) -> dict[str, Any]:
    return {"type": event_type, "ts": ts, "runId": RUN, **fields}


def seed(*events: dict[str, Any], start: Snapshot | None = None) -> dict[str, Any]:
    return fold(events, start).seed_fields()


def armed(ts: int = 1000, **fields: Any) -> dict[str, Any]:
    return ev("armed", ts, **{"label": "demo", "maxIterations": 10, "minIterations": 1, **fields})


# --- the initial snapshot -------------------------------------------------------------------


def test_seed_fields_have_the_contract_keys_in_order() -> None:
    assert list(Snapshot().seed_fields()) == list(INITIAL)


def test_initial_snapshot_equals_the_seed_initial_snapshot() -> None:
    assert Snapshot().seed_fields() == INITIAL
    assert fold([]).seed_fields() == INITIAL
    assert not Snapshot().terminal


def test_every_accepted_seed_event_sets_updated_at_even_when_ignored() -> None:
    ignored = [
        ev("stage_start", 5),  # no numeric stage
        ev("workitem_start", 6, kind="epic"),  # invalid kind
        ev("stagnation", 7, streak="3"),
        ev("session_attached", 8, sessionId=""),
    ]
    for event in ignored:
        assert seed(event) == {**INITIAL, "updatedAt": event["ts"]}


def test_our_own_event_types_leave_the_seed_fields_alone() -> None:
    # The seed reader skips lines of types it does not know, updatedAt included.
    base = [armed(1000), ev("iteration_start", 1001, iteration=1)]
    ours = [
        ev("rate_limited", 1002, waitingUntil=99_999),
        ev("message_queued", 1003, text="hi"),
        ev("checkpoint", 1004, ref="refs/autopilot/x/1"),
        ev("warning", 1005, message="x"),
        ev("backlog_verified", 1006, iteration=1, passed=False, items=[], reopened=["a"]),
        ev("workitem_mark", 1007, itemId="a", iteration=1, sinceDigest="sha256:00", since=None),
    ]
    assert fold(base + ours).seed_fields() == fold(base).seed_fields()


def test_rate_limited_sets_waiting_until_and_the_next_iteration_clears_it() -> None:
    snap = fold([armed(), ev("rate_limited", 1001, waitingUntil=5000)])
    assert snap.waitingUntil == 5000
    assert fold([ev("iteration_start", 1002, iteration=1)], snap).waitingUntil is None
    assert fold([ev("resume", 1002)], snap).waitingUntil is None
    assert fold([ev("rate_limited", 1002, waitingUntil="soon")], snap).waitingUntil is None


# --- armed ----------------------------------------------------------------------------------


def test_armed_starts_a_run() -> None:
    assert seed(ev("armed", 1000, label="demo", maxIterations=5, minIterations=2, startedAt=1)) == {
        **INITIAL,
        "runId": RUN,
        "label": "demo",
        "status": "running",
        "maxIterations": 5,
        "minIterations": 2,
        "startedAt": 1000,
        "updatedAt": 1000,
    }


def _busy_run() -> list[dict[str, Any]]:
    return [
        armed(1000, label="first", maxIterations=7, minIterations=3),
        ev("iteration_start", 1001, iteration=1),
        ev("session_attached", 1002, sessionId="s-1"),
        ev("stage_start", 1003, stage=1, stageName="ORIENT"),
        ev("substage", 1004, sub=1, verb="bash"),
        ev("stage_end", 1005, stage=1),
        ev("stage_start", 1006, stage=2),
        ev("workitem_start", 1007, kind="issue", ref=4, title="t"),
        ev("stage_plan", 1008, stages=["A", "B"]),
        ev("stage_plan_amend", 1009, add="C", reason="r"),
        ev("task_list", 1010, stage="A", items=["x"]),
        ev("task_start", 1011, stage="A", sub=1, desc="d"),
        ev("task_end", 1012, stage="A", sub=1, outcome="ok"),
        ev("task_start", 1013, stage="A", sub=2, desc="d2"),
        ev("commit_observed", 1014, sha="abcdef1", subject="s"),
        ev("worktree_created", 1015, path="/w/1", branch="b1"),
        ev("worktree_kept", 1016, path="/w/0", branch="b0"),
        ev("backlog_snapshot", 1017, redCi=1),
        ev("workitem_end", 1018, kind="pr", closesN=1),
        ev("usage_update", 1019, tokens={"input": 1, "output": 2}, premiumRequests=3),
        ev("iteration_end", 1020, iteration=1, excerpt="e", outcome="ok"),
        ev("stagnation", 1021, streak=2),
        ev("abort", 1022, reason="stopped", note="by user"),
    ]


def test_a_second_armed_wipes_the_previous_run_but_keeps_label_and_limits_when_null() -> None:
    events = [*_busy_run(), ev("armed", 2000, label=None, maxIterations=None)]
    assert seed(*events) == {
        **INITIAL,
        "runId": RUN,
        "label": "first",
        "status": "running",
        "maxIterations": 7,
        "minIterations": 3,
        "startedAt": 2000,
        "updatedAt": 2000,
    }


def test_a_second_armed_takes_new_label_and_limits() -> None:
    events = [*_busy_run(), ev("armed", 2000, label="second", maxIterations=0, minIterations=0)]
    result = seed(*events)
    assert (result["label"], result["maxIterations"], result["minIterations"]) == ("second", 0, 0)


def test_armed_resets_our_own_fields_too() -> None:
    snap = fold(
        [
            *_busy_run(),
            ev("usage_update", 1030, costUsd=1.5),
            ev("rate_limited", 1031, waitingUntil=9),
            armed(2000),
        ]
    )
    assert (snap.costUsd, snap.waitingUntil, snap.note, snap.outcomes) == (0.0, None, None, {})


# --- iterations and usage -------------------------------------------------------------------


def test_iteration_start_appends_with_tokens_and_premium_at_start() -> None:
    snap = fold(
        [
            armed(),
            ev("usage_update", 1001, tokens={"input": 0, "output": 50}, premiumRequests=2),
            ev("iteration_start", 1002, iteration=1),
            ev("usage_update", 1003, tokens={"input": 0, "output": 80}, premiumRequests=3),
        ]
    )
    assert snap.iteration == 1
    assert snap.iterations == [
        {
            "iteration": 1,
            "startedAt": 1002,
            "endedAt": None,
            "excerpt": None,
            "tokensAtStart": {"input": 0, "output": 50},
            "premiumAtStart": 2,
        }
    ]
    assert snap.tokens == {"input": 0, "output": 80}


def test_iteration_start_clears_the_stage_row_and_resumes() -> None:
    before = fold(
        [
            armed(),
            ev("iteration_start", 1001, iteration=1),
            ev("stage_start", 1002, stage=1),
            ev("stage_end", 1003, stage=1),
            ev("stage_start", 1004, stage=2),
            *[ev("substage", 1005, sub=i) for i in range(300)],
            ev("pause", 1006),
        ]
    )
    assert before.currentStageSubstagesDropped == 44
    after = fold([ev("iteration_start", 1007, iteration=2)], before)
    assert after.status == "running"
    assert after.activeStage is None
    assert after.recentStages == []
    assert after.currentStageSubstages == []
    assert after.currentStageSubstagesDropped == 0
    assert [i["iteration"] for i in after.iterations] == [1, 2]


@pytest.mark.parametrize("bad", [None, "2", True, [2], {"n": 2}, float("inf")])
def test_iteration_start_without_a_finite_number_appends_nothing_but_still_resets(
    bad: Any,
) -> None:
    start = fold([armed(), ev("iteration_start", 1001, iteration=1), ev("pause", 1002)])
    fields: dict[str, Any] = {} if bad is None else {"iteration": bad}
    snap = fold([ev("iteration_start", 1003, **fields)], start)
    assert snap.iteration == 1
    assert len(snap.iterations) == 1
    assert snap.status == "running"


def test_iteration_end_closes_the_matching_last_iteration() -> None:
    snap = fold(
        [
            armed(),
            ev("iteration_start", 1001, iteration=1),
            ev("pause", 1002),
            ev(
                "iteration_end",
                1500,
                iteration=1,
                excerpt="done",
                filesChanged=3,
                tokens={"input": 0, "output": 900},
                premiumRequests=4,
            ),
        ]
    )
    assert snap.iterations[-1] == {
        "iteration": 1,
        "startedAt": 1001,
        "endedAt": 1500,
        "excerpt": "done",
        "tokensAtStart": {"input": 0, "output": 0},
        "premiumAtStart": None,
        "filesChanged": 3,
    }
    assert snap.lastExcerpt == "done"
    assert snap.tokens == {"input": 0, "output": 900}
    assert snap.premiumRequests == 4
    # iteration_end changes neither the iteration number nor the status.
    assert (snap.iteration, snap.status) == (1, "paused")


def test_iteration_end_without_an_iteration_number_closes_the_last() -> None:
    snap = fold([armed(), ev("iteration_start", 1001, iteration=4), ev("iteration_end", 1002)])
    assert snap.iterations[-1]["endedAt"] == 1002
    snap = fold(
        [
            armed(),
            ev("iteration_start", 1001, iteration=4),
            ev("iteration_end", 1002, iteration="4"),
        ]
    )
    assert snap.iterations[-1]["endedAt"] == 1002


def test_iteration_end_for_another_iteration_closes_nothing_but_updates_usage() -> None:
    snap = fold(
        [
            armed(),
            ev("iteration_start", 1001, iteration=2),
            ev(
                "iteration_end",
                1002,
                iteration=1,
                excerpt="late",
                tokens={"output": 7},
                premiumRequests=1,
            ),
        ]
    )
    assert snap.iterations[-1]["endedAt"] is None
    assert snap.iterations[-1]["excerpt"] is None
    assert snap.lastExcerpt == "late"
    assert snap.tokens == {"input": 0, "output": 7}
    assert snap.premiumRequests == 1


def test_iteration_end_with_no_iterations_still_updates_usage() -> None:
    snap = fold([armed(), ev("iteration_end", 1002, iteration=1, excerpt="", tokens={"input": 3})])
    assert snap.iterations == []
    assert snap.lastExcerpt == ""
    assert snap.tokens == {"input": 3, "output": 0}


def test_iteration_end_keeps_an_empty_excerpt_and_ignores_bad_files_changed() -> None:
    snap = fold(
        [
            armed(),
            ev("iteration_start", 1001, iteration=1),
            ev("iteration_end", 1002, iteration=1, excerpt="", filesChanged=-1),
        ]
    )
    assert snap.iterations[-1]["excerpt"] == ""
    assert "filesChanged" not in snap.iterations[-1]
    snap = fold(
        [
            armed(),
            ev("iteration_start", 1001, iteration=1),
            ev("iteration_end", 1002, iteration=1, excerpt=5, filesChanged="3"),
        ]
    )
    assert snap.iterations[-1]["excerpt"] is None
    assert snap.lastExcerpt is None
    assert "filesChanged" not in snap.iterations[-1]


@pytest.mark.parametrize("event_type", ["iteration_end", "usage_update"])
@pytest.mark.parametrize(
    ("tokens", "expected"),
    [
        ({"input": 5, "output": 9}, {"input": 5, "output": 9}),
        ({"input": "5", "output": 9}, {"input": 1, "output": 9}),
        ({"input": 5}, {"input": 5, "output": 2}),
        ({"input": True, "output": None}, {"input": 1, "output": 2}),
        ({"input": float("inf"), "output": 3.5}, {"input": 1, "output": 3.5}),
        ({}, {"input": 1, "output": 2}),
        ([], {"input": 1, "output": 2}),
        ("lots", {"input": 1, "output": 2}),
        (0, {"input": 1, "output": 2}),
        (None, {"input": 1, "output": 2}),
    ],
)
def test_tokens_are_set_only_from_finite_values(
    event_type: str, tokens: Any, expected: dict[str, Any]
) -> None:
    start = fold([armed(), ev("usage_update", 1001, tokens={"input": 1, "output": 2})])
    assert fold([ev(event_type, 1002, tokens=tokens)], start).tokens == expected


@pytest.mark.parametrize("event_type", ["iteration_end", "usage_update"])
@pytest.mark.parametrize(
    ("premium", "expected"), [(0, 0), (7, 7), (2.5, 2.5), (-1, 5), ("9", 5), (True, 5), (None, 5)]
)
def test_premium_requests_are_set_only_when_finite_and_not_negative(
    event_type: str, premium: Any, expected: Any
) -> None:
    start = fold([armed(), ev("usage_update", 1001, premiumRequests=5)])
    assert fold([ev(event_type, 1002, premiumRequests=premium)], start).premiumRequests == expected


def test_usage_update_sets_the_live_excerpt_of_the_open_iteration() -> None:
    start = fold([armed(), ev("iteration_start", 1001, iteration=3)])
    for fields in (
        {"excerpt": "live"},
        {"excerpt": "live", "iteration": 3},
        {"excerpt": "live", "iteration": "x"},
    ):
        snap = fold([ev("usage_update", 1002, **fields)], start)
        assert (snap.iterations[-1]["excerpt"], snap.lastExcerpt) == ("live", "live")


def test_usage_update_excerpt_is_ignored_when_empty_closed_or_for_another_iteration() -> None:
    open_iter = fold([armed(), ev("iteration_start", 1001, iteration=3)])
    closed = fold([ev("iteration_end", 1002, iteration=3, excerpt="final")], open_iter)
    cases = [
        (open_iter, {"excerpt": ""}, None),
        (open_iter, {"excerpt": "x", "iteration": 2}, None),
        (closed, {"excerpt": "late"}, "final"),
        (fold([armed()]), {"excerpt": "x"}, None),
    ]
    for start, fields, expected in cases:
        snap = fold([ev("usage_update", 1003, **fields)], start)
        assert snap.lastExcerpt == expected
        if snap.iterations:
            assert snap.iterations[-1]["excerpt"] == expected


def test_usage_update_does_not_change_iteration_or_status() -> None:
    start = fold([armed(), ev("iteration_start", 1001, iteration=3), ev("pause", 1002)])
    snap = fold([ev("usage_update", 1003, iteration=9, tokens={"output": 1})], start)
    assert (snap.iteration, snap.status, len(snap.iterations)) == (3, "paused", 1)


def test_cost_is_ours_and_cumulative() -> None:
    snap = fold(
        [armed(), ev("usage_update", 1001, costUsd=0.25), ev("iteration_end", 1002, costUsd=-1)]
    )
    assert snap.costUsd == 0.25


# --- pause, resume, stagnation, terminal ---------------------------------------------------


def test_pause_and_resume_set_the_status() -> None:
    assert fold([armed(), ev("pause", 1001)]).status == "paused"
    assert fold([armed(), ev("pause", 1001), ev("resume", 1002)]).status == "running"


@pytest.mark.parametrize(
    ("events", "seed_status", "run_status"),
    [
        ([], "idle", RunStatus.IDLE),
        ([armed()], "running", RunStatus.RUNNING),
        ([armed(), ev("pause", 1001)], "paused", RunStatus.PAUSED),
        (
            [armed(), ev("complete", 1001, reason="completion_promise")],
            "complete",
            RunStatus.COMPLETED,
        ),
        ([armed(), ev("abort", 1001, reason="max_iterations")], "aborted", RunStatus.STOPPED),
    ],
)
def test_a_folded_status_is_the_seeds_word_and_a_run_status(
    events: list[dict[str, Any]], seed_status: str, run_status: RunStatus
) -> None:
    snap = fold(events)
    assert snap.status == seed_status
    assert snap.to_dict()["status"] == seed_status
    assert snap.run_status is run_status


@pytest.mark.parametrize(("streak", "expected"), [(2, 2), (0, 0), ("3", 1), (None, 1), (True, 1)])
def test_stagnation_sets_the_streak_when_finite(streak: Any, expected: Any) -> None:
    start = fold([armed(), ev("stagnation", 1001, streak=1)])
    assert fold([ev("stagnation", 1002, streak=streak)], start).stagnationStreak == expected


@pytest.mark.parametrize(("event_type", "status"), [("complete", "complete"), ("abort", "aborted")])
def test_terminal_events_set_status_reason_and_terminal_at(event_type: str, status: str) -> None:
    snap = fold([armed(), ev(event_type, 1500, reason="max_iterations", note="reached max=3")])
    assert (snap.status, snap.reason, snap.terminalAt) == (status, "max_iterations", 1500)
    assert snap.terminal
    assert snap.note == "reached max=3"


def test_a_terminal_event_without_reason_keeps_the_previous_reason() -> None:
    snap = fold([armed(), ev("abort", 1500, reason="stopped"), ev("complete", 1600)])
    assert (snap.status, snap.reason, snap.terminalAt) == ("complete", "stopped", 1600)
    snap = fold([armed(), ev("abort", 1500, reason="stopped"), ev("complete", 1600, reason="")])
    assert snap.reason == ""


# --- stages and substages -------------------------------------------------------------------


def test_stage_start_sets_the_active_stage_and_clears_the_stage_state() -> None:
    start = fold(
        [
            armed(),
            ev("stage_start", 1001, stage=1),
            ev("task_list", 1002, stage="ORIENT", items=["a"]),
            ev("task_start", 1003, stage="ORIENT", sub=1, desc="a"),
            *[ev("substage", 1004, sub=i) for i in range(260)],
        ]
    )
    snap = fold([ev("stage_start", 1010, stage=2, stageName="IMPLEMENT")], start)
    assert snap.activeStage == {"stage": 2, "name": "IMPLEMENT", "startedAt": 1010}
    assert snap.currentStageSubstages == []
    assert snap.currentStageSubstagesDropped == 0
    assert snap.currentTaskList is None
    assert snap.taskInFlight is None
    assert fold([ev("stage_start", 1010, stage=3, stageName="")], start).activeStage == {
        "stage": 3,
        "name": "STAGE_3",
        "startedAt": 1010,
    }


@pytest.mark.parametrize("bad", [None, "2", True, [2]])
def test_stage_start_without_a_numeric_stage_is_ignored(bad: Any) -> None:
    start = fold([armed(), ev("stage_start", 1001, stage=1), ev("substage", 1002, sub=1)])
    fields: dict[str, Any] = {} if bad is None else {"stage": bad}
    snap = fold([ev("stage_start", 1003, stageName="X", **fields)], start)
    assert snap.seed_fields() == {**start.seed_fields(), "updatedAt": 1003}


def test_stage_end_of_the_active_stage_takes_its_start_and_name() -> None:
    snap = fold(
        [
            armed(),
            ev("stage_start", 1000, stage=1, stageName="ORIENT"),
            ev("stage_end", 1250, stage=1, outcome="ok"),
        ]
    )
    assert snap.recentStages == [
        {
            "stage": 1,
            "name": "ORIENT",
            "startedAt": 1000,
            "endedAt": 1250,
            "durationMs": 250,
            "outcome": "ok",
        }
    ]
    assert snap.activeStage is None


def test_stage_end_prefers_its_own_name_and_duration() -> None:
    snap = fold(
        [
            armed(),
            ev("stage_start", 1000, stage=1, stageName="ORIENT"),
            ev("stage_end", 1250, stage=1, stageName="PLAN", durationMs=7, outcome=3),
        ]
    )
    assert snap.recentStages[-1] == {
        "stage": 1,
        "name": "PLAN",
        "startedAt": 1000,
        "endedAt": 1250,
        "durationMs": 7,
        "outcome": None,
    }


def test_stage_end_of_another_stage_leaves_the_active_one() -> None:
    snap = fold(
        [
            armed(),
            ev("stage_start", 1000, stage=2, stageName="TEST"),
            ev("stage_end", 1250, stage=1, durationMs="9"),
        ]
    )
    assert snap.recentStages == [
        {
            "stage": 1,
            "name": "STAGE_1",
            "startedAt": None,
            "endedAt": 1250,
            "durationMs": None,
            "outcome": None,
        }
    ]
    assert snap.activeStage == {"stage": 2, "name": "TEST", "startedAt": 1000}


@pytest.mark.parametrize("bad", [None, "1", True])
def test_stage_end_without_a_numeric_stage_is_ignored(bad: Any) -> None:
    start = fold([armed(), ev("stage_start", 1000, stage=1, stageName="ORIENT")])
    fields: dict[str, Any] = {} if bad is None else {"stage": bad}
    snap = fold([ev("stage_end", 1250, stageName="ORIENT", **fields)], start)
    assert snap.seed_fields() == {**start.seed_fields(), "updatedAt": 1250}


def test_substage_appends_typed_fields() -> None:
    snap = fold(
        [
            armed(),
            ev("substage", 1001, sub=1, verb="bash", argsSummary="ls", outcome="ok", durationMs=12),
            ev("substage", 1002, sub=2, verb=5, argsSummary=None, outcome=[], durationMs="1"),
            ev("substage", 1003, sub="3", verb="ignored"),
        ]
    )
    assert snap.currentStageSubstages == [
        {
            "sub": 1,
            "ts": 1001,
            "verb": "bash",
            "argsSummary": "ls",
            "outcome": "ok",
            "durationMs": 12,
        },
        {
            "sub": 2,
            "ts": 1002,
            "verb": None,
            "argsSummary": None,
            "outcome": None,
            "durationMs": None,
        },
    ]


def test_substages_are_capped_at_256_and_count_what_was_dropped() -> None:
    snap = fold([armed(), *[ev("substage", 2000 + i, sub=i) for i in range(300)]])
    assert len(snap.currentStageSubstages) == 256
    assert snap.currentStageSubstages[0]["sub"] == 44
    assert snap.currentStageSubstages[-1]["sub"] == 299
    assert snap.currentStageSubstagesDropped == 44


# --- backlog and work items -----------------------------------------------------------------


def test_backlog_snapshot_replaces_the_whole_record() -> None:
    snap = fold(
        [
            armed(),
            ev("backlog_snapshot", 1001, redCi=1, openPrs=2, openIssues=3, closedByLoop=4),
            ev("backlog_snapshot", 1002, openPrs=5, openIssues="6", redCi=None),
        ]
    )
    assert snap.backlog == {"redCi": None, "openPrs": 5, "openIssues": None, "closedByLoop": None}


@pytest.mark.parametrize("kind", ["issue", "pr", "red_ci"])
def test_workitem_start_sets_the_active_item_and_clears_plan_and_tasks(kind: str) -> None:
    start = fold(
        [
            armed(),
            ev("stage_plan", 1001, stages=["A"]),
            ev("task_list", 1002, stage="A", items=["x"]),
            ev("task_start", 1003, stage="A", sub=1, desc="x"),
        ]
    )
    snap = fold([ev("workitem_start", 1004, kind=kind, ref=42, title="Fix it")], start)
    assert snap.activeWorkItem == {"kind": kind, "ref": 42, "title": "Fix it", "startedAt": 1004}
    assert (snap.currentPlan, snap.currentTaskList, snap.taskInFlight) == (None, None, None)
    snap = fold([ev("workitem_start", 1004, kind=kind, ref="42", title="")], start)
    assert snap.activeWorkItem == {"kind": kind, "ref": None, "title": None, "startedAt": 1004}


@pytest.mark.parametrize("kind", ["epic", "", None, "ISSUE", 1])
def test_workitems_of_another_kind_are_ignored(kind: Any) -> None:
    start = fold([armed(), ev("stage_plan", 1001, stages=["A"])])
    for event_type in ("workitem_start", "workitem_end"):
        snap = fold([ev(event_type, 1002, kind=kind, ref=1, closesN=1)], start)
        assert snap.seed_fields() == {**start.seed_fields(), "updatedAt": 1002}


def test_workitem_end_matching_the_active_item() -> None:
    snap = fold(
        [
            armed(),
            ev("workitem_start", 1001, kind="issue", ref=42, title="Fix it"),
            ev("workitem_end", 1900, kind="issue", ref=42, closesN=42),
        ]
    )
    assert snap.completedWorkItems == [
        {
            "kind": "issue",
            "ref": 42,
            "title": "Fix it",
            "startedAt": 1001,
            "endedAt": 1900,
            "closesN": 42,
        }
    ]
    assert snap.closedByLoop == 1
    assert snap.activeWorkItem is None


def test_workitem_end_without_ref_matches_on_kind() -> None:
    snap = fold(
        [
            armed(),
            ev("workitem_start", 1001, kind="pr", ref=7, title="T"),
            ev("workitem_end", 1900, kind="pr", title="Renamed"),
        ]
    )
    assert snap.completedWorkItems[-1] == {
        "kind": "pr",
        "ref": None,
        "title": "Renamed",
        "startedAt": 1001,
        "endedAt": 1900,
        "closesN": None,
    }
    assert snap.closedByLoop == 0
    assert snap.activeWorkItem is None


@pytest.mark.parametrize("fields", [{"kind": "issue", "ref": 43}, {"kind": "pr", "ref": 42}])
def test_workitem_end_not_matching_keeps_the_active_item(fields: dict[str, Any]) -> None:
    snap = fold(
        [
            armed(),
            ev("workitem_start", 1001, kind="issue", ref=42, title="Fix it"),
            ev("workitem_end", 1900, closesN="1", **fields),
        ]
    )
    assert snap.completedWorkItems == [
        {**fields, "title": None, "startedAt": None, "endedAt": 1900, "closesN": None}
    ]
    assert snap.closedByLoop == 0
    assert snap.activeWorkItem == {"kind": "issue", "ref": 42, "title": "Fix it", "startedAt": 1001}


# --- plans and tasks ------------------------------------------------------------------------


def test_stage_plan_keeps_non_empty_strings() -> None:
    snap = fold([armed(), ev("stage_plan", 1001, stages=["A", "", 3, None, "B"])])
    assert snap.currentPlan == {"stages": ["A", "B"], "setAt": 1001}


@pytest.mark.parametrize("stages", [[], ["", 1], "AB", None])
def test_stage_plan_without_any_stage_keeps_the_old_plan(stages: Any) -> None:
    start = fold([armed(), ev("stage_plan", 1001, stages=["A"])])
    assert fold([ev("stage_plan", 1002, stages=stages)], start).currentPlan == {
        "stages": ["A"],
        "setAt": 1001,
    }


@pytest.mark.parametrize(
    ("amend", "expected"),
    [
        ({"add": "X", "after": "B"}, ["A", "B", "X", "C", "B"]),
        ({"add": "X"}, ["A", "B", "C", "B", "X"]),
        ({"add": "X", "after": "missing"}, ["A", "B", "C", "B", "X"]),
        ({"remove": "B"}, ["A", "C", "B"]),
        ({"remove": "missing"}, ["A", "B", "C", "B"]),
        ({"remove": "A", "add": "A", "after": "C"}, ["B", "C", "A", "B"]),
        ({"remove": "B", "add": "X", "after": "B"}, ["A", "C", "B", "X"]),
    ],
)
def test_stage_plan_amend_edits_the_plan(amend: dict[str, Any], expected: list[str]) -> None:
    start = fold([armed(), ev("stage_plan", 1001, stages=["A", "B", "C", "B"])])
    snap = fold([ev("stage_plan_amend", 1002, reason="why", **amend)], start)
    assert snap.currentPlan == {"stages": expected, "setAt": 1002}
    assert snap.planAmendments == [
        {
            "add": amend.get("add"),
            "remove": amend.get("remove"),
            "after": amend.get("after"),
            "reason": "why",
            "ts": 1002,
        }
    ]


def test_stage_plan_amend_is_recorded_without_a_plan() -> None:
    snap = fold([armed(), ev("stage_plan_amend", 1002, add="X", after="", reason=5)])
    assert snap.currentPlan is None
    assert snap.planAmendments == [
        {"add": "X", "remove": None, "after": None, "reason": "", "ts": 1002}
    ]


@pytest.mark.parametrize("amend", [{}, {"add": ""}, {"remove": 3}, {"after": "A", "reason": "r"}])
def test_stage_plan_amend_needs_add_or_remove(amend: dict[str, Any]) -> None:
    start = fold([armed(), ev("stage_plan", 1001, stages=["A"])])
    snap = fold([ev("stage_plan_amend", 1002, **amend)], start)
    assert snap.planAmendments == []
    assert snap.currentPlan == {"stages": ["A"], "setAt": 1001}


def test_task_list_keeps_non_empty_string_items() -> None:
    snap = fold([armed(), ev("task_list", 1001, stage="TEST", items=["a", "", 2, "b"])])
    assert snap.currentTaskList == {"stage": "TEST", "items": ["a", "b"], "setAt": 1001}


@pytest.mark.parametrize(
    "fields", [{"stage": "", "items": []}, {"stage": "T", "items": "a"}, {"items": ["a"]}]
)
def test_task_list_needs_a_stage_and_an_items_array(fields: dict[str, Any]) -> None:
    assert fold([armed(), ev("task_list", 1001, **fields)]).currentTaskList is None


def test_task_start_and_matching_task_end() -> None:
    snap = fold(
        [
            armed(),
            ev("task_start", 1000, stage="TEST", sub=2, desc="run tests"),
        ]
    )
    assert snap.taskInFlight == {"stage": "TEST", "sub": 2, "desc": "run tests", "startedAt": 1000}
    snap = fold([ev("task_end", 1300, stage="TEST", sub=2, outcome="fail")], snap)
    assert snap.recentTasks == [
        {
            "stage": "TEST",
            "sub": 2,
            "desc": "run tests",
            "outcome": "fail",
            "durationMs": 300,
            "startedAt": 1000,
            "endedAt": 1300,
        }
    ]
    assert snap.taskInFlight is None


def test_task_start_desc_defaults_to_empty() -> None:
    snap = fold([armed(), ev("task_start", 1000, stage="T", sub=1, desc=None)])
    assert snap.taskInFlight == {"stage": "T", "sub": 1, "desc": "", "startedAt": 1000}


@pytest.mark.parametrize(
    "fields", [{"stage": "", "sub": 1}, {"stage": "T", "sub": "1"}, {"sub": 1}]
)
def test_task_start_needs_stage_and_sub(fields: dict[str, Any]) -> None:
    assert fold([armed(), ev("task_start", 1000, desc="d", **fields)]).taskInFlight is None


def test_task_end_not_matching_keeps_the_task_in_flight() -> None:
    start = fold([armed(), ev("task_start", 1000, stage="T", sub=1, desc="d")])
    snap = fold([ev("task_end", 1300, stage="T", sub=2, outcome="skip", durationMs=5)], start)
    assert snap.recentTasks == [
        {
            "stage": "T",
            "sub": 2,
            "desc": None,
            "outcome": "skip",
            "durationMs": 5,
            "startedAt": None,
            "endedAt": 1300,
        }
    ]
    assert snap.taskInFlight == {"stage": "T", "sub": 1, "desc": "d", "startedAt": 1000}
    snap = fold([ev("task_end", 1300, stage="T", sub=2, outcome="ok")], start)
    assert snap.recentTasks[-1]["durationMs"] is None


@pytest.mark.parametrize("outcome", ["done", "", None, "OK"])
def test_task_end_with_another_outcome_is_ignored(outcome: Any) -> None:
    start = fold([armed(), ev("task_start", 1000, stage="T", sub=1, desc="d")])
    snap = fold([ev("task_end", 1300, stage="T", sub=1, outcome=outcome)], start)
    assert snap.recentTasks == []
    assert snap.taskInFlight is not None


# --- commits, sessions, worktrees -----------------------------------------------------------


def test_commit_observed_keeps_the_sha_as_given_and_filters_trailers() -> None:
    snap = fold(
        [
            armed(),
            ev(
                "commit_observed",
                1001,
                sha="ABCDEF1",
                subject="Fix",
                trailers=["Co-authored-by: x", "", 3],
            ),
        ]
    )
    assert snap.lastCommit == {
        "sha": "ABCDEF1",
        "subject": "Fix",
        "trailers": ["Co-authored-by: x"],
        "ts": 1001,
    }
    snap = fold([armed(), ev("commit_observed", 1001, sha="abcdef1", subject="Fix", trailers="x")])
    assert snap.lastCommit == {"sha": "abcdef1", "subject": "Fix", "trailers": [], "ts": 1001}


@pytest.mark.parametrize(
    "fields",
    [
        {"sha": "", "subject": "s"},
        {"sha": "abc1234", "subject": ""},
        {"sha": 1234567, "subject": "s"},
        {"sha": "abc1234"},
    ],
)
def test_commit_observed_needs_a_sha_and_a_subject(fields: dict[str, Any]) -> None:
    assert fold([armed(), ev("commit_observed", 1001, **fields)]).lastCommit is None


@pytest.mark.parametrize(
    ("session", "accepted"),
    [
        ("abc", True),
        ("x" * 64, True),
        ("x" * 65, False),
        ("", False),
        (5, False),
        # The seed counts length in UTF-16 code units.
        (EMOJI * 32, True),
        (EMOJI * 33, False),
    ],
)
def test_session_attached_takes_a_non_empty_id_of_at_most_64(session: Any, accepted: bool) -> None:
    start = fold([armed(), ev("session_attached", 1001, sessionId="old")])
    expected = session if accepted else "old"
    assert fold([ev("session_attached", 1002, sessionId=session)], start).sessionId == expected


def test_worktree_created_sets_the_active_worktree() -> None:
    snap = fold(
        [
            armed(),
            ev("worktree_created", 1001, path="/w/1", branch="ap/1", baseRef="main", iteration=1),
        ]
    )
    assert snap.activeWorktree == {
        "path": "/w/1",
        "branch": "ap/1",
        "baseRef": "main",
        "iteration": 1,
        "startedAt": 1001,
    }
    snap = fold(
        [
            armed(),
            ev("worktree_created", 1001, path="/w/1", branch="ap/1", baseRef="", iteration="1"),
        ]
    )
    assert snap.activeWorktree == {
        "path": "/w/1",
        "branch": "ap/1",
        "baseRef": None,
        "iteration": None,
        "startedAt": 1001,
    }


@pytest.mark.parametrize(
    "fields", [{"path": "", "branch": "b"}, {"path": "/w", "branch": ""}, {"path": "/w"}]
)
def test_worktree_created_needs_path_and_branch(fields: dict[str, Any]) -> None:
    assert fold([armed(), ev("worktree_created", 1001, **fields)]).activeWorktree is None


def test_worktree_removed_clears_only_the_same_path() -> None:
    start = fold([armed(), ev("worktree_created", 1001, path="/w/1", branch="b")])
    assert fold([ev("worktree_removed", 1002, path="/w/2")], start).activeWorktree is not None
    assert fold([ev("worktree_removed", 1002, path="/w/1")], start).activeWorktree is None


def test_worktree_kept_appends_counts_and_clears_the_same_path() -> None:
    start = fold([armed(), ev("worktree_created", 1001, path="/w/1", branch="b1")])
    snap = fold(
        [
            ev("worktree_kept", 1002, path="/w/0", branch="b0", iteration=0),
            ev("worktree_kept", 1003, path="/w/1", branch="b1", iteration="1"),
            ev("worktree_kept", 1004, path="/w/9"),
        ],
        start,
    )
    assert snap.keptWorktrees == [
        {"path": "/w/0", "branch": "b0", "iteration": 0, "ts": 1002},
        {"path": "/w/1", "branch": "b1", "iteration": None, "ts": 1003},
    ]
    assert snap.keptWorktreeCount == 2
    assert snap.activeWorktree is None


# --- history caps ---------------------------------------------------------------------------


HISTORY_CASES = {
    "iterations": lambda i: ev("iteration_start", 2000 + i, iteration=i),
    "recentStages": lambda i: ev("stage_end", 2000 + i, stage=i),
    "completedWorkItems": lambda i: ev("workitem_end", 2000 + i, kind="issue", ref=i),
    "planAmendments": lambda i: ev("stage_plan_amend", 2000 + i, add=f"S{i}", reason="r"),
    "recentTasks": lambda i: ev("task_end", 2000 + i, stage="T", sub=i, outcome="ok"),
    "keptWorktrees": lambda i: ev("worktree_kept", 2000 + i, path=f"/w/{i}", branch="b"),
}


@pytest.mark.parametrize("field", list(HISTORY_CASES))
def test_history_arrays_keep_the_newest_256(field: str) -> None:
    assert MAX_SNAPSHOT_HISTORY == 256
    make = HISTORY_CASES[field]
    snap = fold([armed(), *[make(i) for i in range(300)]])
    history = getattr(snap, field)
    assert len(history) == 256
    assert history[0] == fold([make(44)]).seed_fields()[field][0]
    assert history[-1] == fold([make(299)]).seed_fields()[field][0]


def test_counters_beside_capped_histories_are_not_capped() -> None:
    snap = fold(
        [
            armed(),
            *[ev("worktree_kept", 2000 + i, path=f"/w/{i}", branch="b") for i in range(300)],
            *[ev("workitem_end", 3000 + i, kind="pr", closesN=i) for i in range(300)],
        ]
    )
    assert (snap.keptWorktreeCount, snap.closedByLoop) == (300, 300)


def test_iteration_outcomes_are_ours_and_capped() -> None:
    snap = fold(
        [armed(), *[ev("iteration_end", 2000 + i, iteration=i, outcome="ok") for i in range(300)]]
    )
    assert len(snap.outcomes) == 256
    assert next(iter(snap.outcomes)) == "44"
    assert snap.outcomes["299"] == "ok"


# --- fold mechanics -------------------------------------------------------------------------


def test_fold_never_changes_the_snapshot_it_continues_from() -> None:
    start = fold(_busy_run()[:-3])
    before = copy.deepcopy(start)
    after = fold(_busy_run()[-3:], start)
    assert start == before
    assert after == fold(_busy_run())
    assert after is not start


def test_to_dict_holds_the_seed_fields_then_ours() -> None:
    data = fold(_busy_run()).to_dict()
    assert list(data)[:33] == list(INITIAL)
    assert {"costUsd", "agent", "model", "waitingUntil", "note", "outcomes"} <= set(data)


def test_armed_records_agent_and_model() -> None:
    snap = fold([armed(agent="claude", model="opus")])
    assert (snap.agent, snap.model) == ("claude", "opus")


# --- properties over generated logs ---------------------------------------------------------

_NAMES = st.sampled_from(["ORIENT", "PLAN", "TEST", "COMMIT", "PUSH", "END", ""])
_JUNK = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**53), 2**53)
    | st.floats(allow_nan=False)
    | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=6,
)


def _field(realistic: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Mostly a realistic value, sometimes junk; None means "leave the key out"."""
    return st.one_of(realistic, realistic, realistic, _JUNK)


_SMALL = st.integers(0, 4)
_TOKENS = st.fixed_dictionaries({"input": st.just(0), "output": st.integers(0, 10**6)})

_FIELDS: dict[str, dict[str, st.SearchStrategy[Any]]] = {
    "armed": {
        "label": st.sampled_from(["ralph-tui-prompt", "demo"]),
        "maxIterations": st.integers(1, 50),
        "minIterations": st.integers(0, 5),
        "agent": st.sampled_from(["claude", "codex"]),
    },
    "iteration_start": {"iteration": _SMALL},
    "iteration_end": {
        "iteration": _SMALL,
        "excerpt": st.text(max_size=20),
        "tokens": _TOKENS,
        "premiumRequests": st.integers(0, 9),
        "filesChanged": st.integers(-1, 9),
        "outcome": st.sampled_from(["ok", "agent_error", "timeout"]),
        "costUsd": st.floats(0, 10),
    },
    "usage_update": {
        "iteration": _SMALL,
        "tokens": _TOKENS,
        "premiumRequests": st.integers(0, 9),
        "excerpt": st.text(max_size=20),
        "costUsd": st.floats(0, 10),
    },
    "pause": {},
    "resume": {},
    "stagnation": {"streak": _SMALL},
    "complete": {
        "reason": st.sampled_from(["completion_promise", "backlog_done"]),
        "note": st.text(max_size=9),
    },
    "abort": {
        "reason": st.sampled_from(["max_iterations", "user_stopped", None]),
        "note": st.text(max_size=9),
    },
    "stage_start": {"stage": st.integers(1, 4), "stageName": _NAMES},
    "stage_end": {
        "stage": st.integers(1, 4),
        "stageName": _NAMES,
        "durationMs": st.integers(0, 10**5),
        "outcome": st.sampled_from(["ok", "fail"]),
    },
    "substage": {
        "sub": st.integers(1, 9),
        "verb": st.sampled_from(["bash", "edit"]),
        "argsSummary": st.text(max_size=10),
        "outcome": st.sampled_from(["ok", "fail"]),
        "durationMs": st.integers(0, 10**4),
    },
    "backlog_snapshot": {
        "redCi": _SMALL,
        "openPrs": _SMALL,
        "openIssues": _SMALL,
        "closedByLoop": _SMALL,
    },
    "workitem_start": {
        "kind": st.sampled_from(["issue", "pr", "red_ci", "epic"]),
        "ref": _SMALL,
        "title": st.text(max_size=10),
    },
    "workitem_end": {
        "kind": st.sampled_from(["issue", "pr", "red_ci", "epic"]),
        "ref": _SMALL,
        "title": st.text(max_size=10),
        "closesN": _SMALL,
    },
    "stage_plan": {"stages": st.lists(_NAMES, max_size=6)},
    "stage_plan_amend": {
        "add": _NAMES,
        "remove": _NAMES,
        "after": _NAMES,
        "reason": st.text(max_size=9),
    },
    "task_list": {"stage": _NAMES, "items": st.lists(st.text(max_size=6), max_size=4)},
    "task_start": {"stage": _NAMES, "sub": st.integers(1, 3), "desc": st.text(max_size=9)},
    "task_end": {
        "stage": _NAMES,
        "sub": st.integers(1, 3),
        "outcome": st.sampled_from(["ok", "fail", "skip", "bad"]),
        "durationMs": st.integers(0, 10**4),
    },
    "commit_observed": {
        "sha": st.sampled_from(["abcdef1", "0123456789abcdef0123456789abcdef01234567", ""]),
        "subject": st.text(max_size=10),
        "trailers": st.lists(st.text(max_size=6), max_size=3),
    },
    "session_attached": {"sessionId": st.text(max_size=70)},
    "worktree_created": {
        "path": st.sampled_from(["/w/1", "/w/2"]),
        "branch": st.sampled_from(["ap/1", ""]),
        "baseRef": st.sampled_from(["main", ""]),
        "iteration": _SMALL,
    },
    "worktree_removed": {"path": st.sampled_from(["/w/1", "/w/2"])},
    "worktree_kept": {
        "path": st.sampled_from(["/w/1", "/w/2"]),
        "branch": st.sampled_from(["ap/1", ""]),
        "iteration": _SMALL,
    },
    # Some of autopilot's own types.
    "rate_limited": {"waitingUntil": st.integers(0, 10**13)},
    "message_queued": {"text": st.text(max_size=10)},
    "checkpoint": {"ref": st.text(max_size=10)},
    "decision_applied": {"decision": st.sampled_from(["continue_next", "stop"])},
}


@st.composite
def events_of(draw: st.DrawFn, ts: int) -> dict[str, Any]:
    event_type = draw(st.sampled_from(sorted(_FIELDS)))
    event: dict[str, Any] = {"type": event_type, "ts": ts, "runId": RUN}
    for key, realistic in _FIELDS[event_type].items():
        if draw(st.integers(0, 5)) == 0:
            continue  # the key is absent
        event[key] = draw(_field(realistic))
    # Junk keys the fold must ignore.
    for key in draw(
        st.lists(st.sampled_from(["x", "startedAt", "status", "iterations"]), max_size=2)
    ):
        event[key] = draw(_JUNK)
    return event


@st.composite
def logs(draw: st.DrawFn, max_size: int = 40) -> list[dict[str, Any]]:
    gaps = draw(st.lists(st.integers(0, 5000), max_size=max_size))
    events: list[dict[str, Any]] = []
    ts = 1_700_000_000_000
    if draw(st.booleans()):
        events.append(armed(ts))
    for gap in gaps:
        ts += gap
        events.append(draw(events_of(ts)))
    return events


def _serialized(event: dict[str, Any]) -> bytes | None:
    try:
        return serialize_event(event)
    except ValueError:  # junk holding an infinity
        return None


_PROPS = settings(deadline=None, max_examples=150, suppress_health_check=[HealthCheck.too_slow])


@_PROPS
@given(logs())
def test_fold_is_deterministic_and_leaves_the_events_alone(events: list[dict[str, Any]]) -> None:
    before = copy.deepcopy(events)
    first = fold(events)
    second = fold(events)
    assert first == second
    assert first.to_dict() == second.to_dict()
    assert events == before


@_PROPS
@given(logs())
def test_fold_of_a_prefix_then_the_rest_equals_fold_of_all(events: list[dict[str, Any]]) -> None:
    whole = fold(events)
    for split in range(len(events) + 1):
        prefix = fold(events[:split])
        assert fold(events[split:], prefix) == whole
    # Event by event, as watch does it.
    step = Snapshot()
    for event in events:
        step = fold([event], step)
    assert step == whole


@_PROPS
@given(logs())
def test_the_seed_fields_ignore_our_own_types(events: list[dict[str, Any]]) -> None:
    only_seed = [e for e in events if e["type"] in SEED_EVENT_TYPES]
    assert fold(events).seed_fields() == fold(only_seed).seed_fields()


@_PROPS
@given(logs())
def test_snapshot_invariants_hold(events: list[dict[str, Any]]) -> None:
    snap = fold(events)
    assert snap.status in {"idle", "running", "paused", "complete", "aborted"}
    for field in HISTORY_CASES:
        assert len(getattr(snap, field)) <= MAX_SNAPSHOT_HISTORY
    assert len(snap.currentStageSubstages) <= MAX_SNAPSHOT_HISTORY
    assert set(snap.tokens) == {"input", "output"}
    assert snap.terminal == (snap.status in {"complete", "aborted"})


@_PROPS
@given(logs(max_size=25), st.data())
def test_a_torn_last_line_is_skipped(events: list[dict[str, Any]], data: st.DataObject) -> None:
    lines = [line for line in map(_serialized, events) if line is not None]
    if not lines:
        return
    *whole, last = lines
    cut = data.draw(st.integers(1, len(last) - 1), label="cut")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "events.jsonl"
        path.write_bytes(b"".join(line + b"\n" for line in whole) + last[:cut])
        from_file = fold(read_events(path))
    parsed = [e for e in map(parse_event_line, whole) if e is not None]
    assert len(parsed) == len(whole)
    assert from_file == fold(parsed)
