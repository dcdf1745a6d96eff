"""Reports waiting for the driver, and the promoted consistency-decision.json."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from autopilot.core.decision_file import report_from_decision_file
from autopilot.core.item_report import ItemDecision, ItemReport
from autopilot.core.workitems import Criterion, ItemStatus, WorkItem
from autopilot.store.reports import (
    claim_reports,
    put_back_claimed,
    take_decision_file,
    write_report,
)

ITEM = WorkItem(
    id="unit-1",
    status=ItemStatus.RUNNING,
    acceptance_criteria=(Criterion("ac1", "a", plain=True), Criterion("ac2", "b", plain=True)),
)
PROMOTED: dict[str, Any] = {
    "schema_version": "autopilot-consistency-decision.v1",
    "decision_id": "d-1",
    "work_item_id": "unit-1",
    "decision": "continue_next",
    "promotion_state": "promoted",
    "promotion_evidence": {"decision": "direct", "source": "before-stop"},
    "candidate_id": "none",
    "governance_signal_digest": "sha256:" + "0" * 64,
    "decision_key": "k",
    "state_hash": "h",
    "loop_key": "l",
    "verdict": "pass",
    "completion_check_digest": "sha256:" + "1" * 64,
    "evidence": [
        "[completion-check] verdict: pass",
        "acceptance-criteria: ac1, ac2",
        "claim-evidence-map: ac1 -> README.md; ac2 -> tests/test_x.py",
    ],
}


def test_reports_are_claimed_once_in_order(tmp_path: Path) -> None:
    first = ItemReport("unit-1", ItemDecision.RETRY_SAME_UNIT, {}, ("flaky",))
    second = ItemReport("unit-1", ItemDecision.STOP, {"ac1": False})
    write_report(tmp_path, first, ts_ms=1000, iteration=2)
    write_report(tmp_path, second, ts_ms=2000, iteration=2)
    (tmp_path / "reports" / "3000-junk.json").write_text("{")
    claimed = claim_reports(tmp_path)
    assert [c.report for c in claimed] == [
        ItemReport("unit-1", ItemDecision.RETRY_SAME_UNIT, {}, ("flaky",)),
        ItemReport("unit-1", ItemDecision.STOP, {"ac1": False}),
        None,
    ]
    assert all(c.path.parent.name == "claimed" for c in claimed)
    assert claim_reports(tmp_path) == []
    assert [p.name for p in (tmp_path / "reports").iterdir()] == ["claimed"]


def test_an_iterations_claims_are_put_back_to_wait_and_claimed_again(tmp_path: Path) -> None:
    # A crash between the claim and the item's conclusion: that iteration's reports
    # wait again, and the next claim takes them with the rest, oldest first.
    early = ItemReport("unit-1", ItemDecision.RETRY_SAME_UNIT, {}, ("flaky",))
    write_report(tmp_path, early, ts_ms=1000, iteration=2)
    claim_reports(tmp_path, iteration=2)
    late = ItemReport("unit-1", ItemDecision.STOP, {})
    write_report(tmp_path, late, ts_ms=2000, iteration=3)
    claim_reports(tmp_path, iteration=3)
    assert put_back_claimed(tmp_path, 4) == []
    assert put_back_claimed(tmp_path, 2) == [f"0000000001000-{os.getpid()}-0.json"]
    latest = ItemReport("unit-1", ItemDecision.CONTINUE_NEXT, {"ac1": True})
    write_report(tmp_path, latest, ts_ms=3000, iteration=2)
    assert [c.report for c in claim_reports(tmp_path, iteration=2)] == [early, latest]
    assert put_back_claimed(tmp_path, 2, names=["nothing-such.json"]) == []
    assert [c.report for c in claim_reports(tmp_path)] == []  # iteration 3's stay claimed


def test_named_claims_are_put_back_with_or_without_the_iteration(tmp_path: Path) -> None:
    first = ItemReport("unit-1", ItemDecision.STOP, {})
    name = write_report(tmp_path, first, ts_ms=1000, iteration=1).name
    claim_reports(tmp_path)  # claimed without an iteration in its name
    assert put_back_claimed(tmp_path, 1, names=[name, "../escape.json"]) == [name]
    assert [c.report for c in claim_reports(tmp_path, iteration=1)] == [first]


def test_the_same_millisecond_never_overwrites(tmp_path: Path) -> None:
    for _ in range(3):
        write_report(tmp_path, ItemReport("a", ItemDecision.STOP, {}), ts_ms=5, iteration=None)
    assert len(claim_reports(tmp_path)) == 3


def test_a_promoted_decision_becomes_a_report() -> None:
    report, problems = report_from_decision_file(PROMOTED, ITEM)
    assert problems == []
    assert report == ItemReport(
        "unit-1",
        ItemDecision.CONTINUE_NEXT,
        {"ac1": True, "ac2": True},
        tuple(PROMOTED["evidence"]),
        source="decision-file",
    )


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"schema_version": "v0"}, "schema_version must be 'autopilot-consistency-decision.v1'"),
        ({"promotion_state": "candidate"}, "promotion_state must be 'promoted'"),
        ({"loop_key": ""}, "loop_key must be a non-empty string"),
        ({"promotion_evidence": {"decision": "maybe"}}, "promotion_evidence.decision must be"),
        ({"evidence": [{"verdict": "pass"}]}, "evidence must be a JSON array of strings"),
        ({"decision": "done"}, "decision must be one of continue_next"),
        ({"verdict": "fail"}, "continue_next needs verdict 'pass' at top level"),
        ({"completion_check_digest": "abc"}, "completion_check_digest as sha256:<64 hex>"),
        (
            {"evidence": ["acceptance-criteria", "claim-evidence-map"]},
            "continue_next needs [completion-check] in the evidence strings",
        ),
    ],
)
def test_a_decision_file_missing_the_promoted_schema_is_refused(
    change: dict[str, Any], problem: str
) -> None:
    report, problems = report_from_decision_file({**PROMOTED, **change}, ITEM)
    assert report is None
    assert any(problem in p for p in problems), problems


def test_take_decision_file_moves_it_aside(tmp_path: Path) -> None:
    folder = tmp_path / ".autopilot"
    folder.mkdir()
    assert take_decision_file(tmp_path, [ITEM]) is None
    (folder / "consistency-decision.json").write_text(json.dumps(PROMOTED))
    taken = take_decision_file(tmp_path, [ITEM])
    assert taken is not None and taken[0] is not None and taken[1] == []
    assert sorted(p.name for p in folder.iterdir()) == ["consistency-decision.applied.json"]
    (folder / "consistency-decision.json").write_text("{not json")
    taken = take_decision_file(tmp_path, [ITEM])
    assert taken is not None and taken[0] is None and "is not JSON" in taken[1][0]
    assert (folder / "consistency-decision.rejected.json").exists()
    assert not (folder / "consistency-decision.json").exists()
