"""What an agent supplies is cut to what an item record and an event can hold."""

from __future__ import annotations

from autopilot.core.item_bounds import (
    MAX_EVIDENCE_BYTES,
    MAX_EVIDENCE_ENTRIES,
    MAX_ITEM_LINE_BYTES,
    bound_report,
    cut_bytes,
    fit_item,
    item_line_bytes,
)
from autopilot.core.item_report import ItemDecision, ItemReport
from autopilot.core.structs import replace
from autopilot.core.workitems import Completion, WorkItem


def test_a_cut_keeps_the_cap_and_names_what_it_removed() -> None:
    text = "é" * 1000  # 2000 bytes
    cut = cut_bytes(text, 100)
    assert len(cut.encode()) <= 100
    kept = cut.split("…")[0]
    assert cut == kept + f"… [cut: {2000 - len(kept.encode())} bytes]"
    assert cut_bytes("short", 100) == "short"
    tail = cut_bytes("a" * 50 + "END", 30, keep_end=True)
    assert tail.startswith("… [cut: ") and tail.endswith("END") and len(tail.encode()) <= 30


def test_a_report_keeps_a_bounded_amount_of_evidence_and_criteria() -> None:
    many = tuple(f"line {n} " + "x" * 3000 for n in range(100))
    criteria = {("c" * 500 if n == 0 else f"ac{n}"): True for n in range(80)}
    report = bound_report(ItemReport("it1", ItemDecision.CONTINUE_NEXT, criteria, many))
    total = sum(len(e.encode()) for e in report.evidence)
    assert total <= MAX_EVIDENCE_BYTES + 64
    assert len(report.evidence) <= MAX_EVIDENCE_ENTRIES + 1
    assert report.evidence[0].startswith("line 0 ") and "[cut: " in report.evidence[0]
    assert report.evidence[-1].endswith("more evidence strings]")
    assert len(report.criteria) == 50
    assert all(len(cid.encode()) <= 128 for cid in report.criteria)
    small = ItemReport("it1", ItemDecision.STOP, {"ac1": True}, ("done",))
    assert bound_report(small) is small


def test_an_item_too_long_for_its_line_is_cut_until_it_fits() -> None:
    item = WorkItem(
        id="it1",
        prompt="p" * 2000,
        blocked_reason="why " * 2000,
        completion=Completion(
            evidence=tuple("ë" * 3000 for _ in range(10)),
            feedback="f" * 3000 + "LAST",
            surface_violations=tuple(f"src/{n}.py" for n in range(100)),
        ),
    )
    fitted = fit_item(item)
    assert item_line_bytes(item) > MAX_ITEM_LINE_BYTES >= item_line_bytes(fitted)
    assert fitted.prompt == item.prompt
    assert fitted.completion.feedback is not None and fitted.completion.feedback.endswith("LAST")
    assert any("[cut: " in e for e in fitted.completion.evidence)
    plain = replace(item, blocked_reason=None, completion=Completion())
    assert fit_item(plain) is plain
