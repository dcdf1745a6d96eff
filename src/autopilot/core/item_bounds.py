"""What an agent supplies, kept to sizes an item record and an event can hold (pure).

An agent's report (``autopilot report`` or a promoted decision file) can carry any
amount of text; what it says lands in the item's ``tasks.jsonl`` record
(``completion.evidence``, ``completion.feedback``, ``blocked_reason``) and in
``workitem_recorded`` / ``workitem_end`` events. A record over ``MAX_ITEM_LINE_BYTES``
cannot be written, and the attempt would not count, so what enters is cut first:
``bound_report`` cuts a report where it enters (``autopilot report``, and again when a
report is applied), and ``fit_item`` cuts the agent-supplied parts of a concluded
item until its line fits. Every cut leaves a visible marker (``… [cut: N bytes]``).
"""

from __future__ import annotations

import json

from autopilot.core.item_report import ItemReport
from autopilot.core.structs import replace
from autopilot.core.text import repair_surrogates
from autopilot.core.workitems import WorkItem

MAX_ITEM_LINE_BYTES = 12 * 1024
"""A ``tasks.jsonl`` line (one item, compact UTF-8 JSON, no newline) is at most this
long (``docs/backlog.md``)."""

MAX_EVIDENCE_ENTRIES = 20
"""A report keeps at most this many evidence strings (the rest become one marker)."""

MAX_EVIDENCE_ENTRY_BYTES = 2048
"""One evidence string is cut to this many UTF-8 bytes, marker included."""

MAX_EVIDENCE_BYTES = 4096
"""All of a report's evidence strings together are cut to about this many bytes."""

MAX_CRITERIA = 50
"""A report keeps at most this many criterion results."""

MAX_CRITERION_ID_BYTES = 128
"""A criterion id in a report is cut to this many bytes (a cut id matches no criterion,
so the report is refused with it named)."""


def cut_marker(removed: int) -> str:
    """The marker left where ``removed`` bytes were cut."""
    return f"… [cut: {removed} bytes]"


def cut_bytes(text: str, limit: int, *, keep_end: bool = False) -> str:
    """``text`` cut to at most ``limit`` UTF-8 bytes, the marker included.

    Args:
        text: Any string (lone surrogates become U+FFFD).
        limit: The cap in bytes (a cap too small for the marker gives the marker alone).
        keep_end: Keep the end of the text (the marker goes first) instead of its start.

    Returns:
        ``text`` if it fits, else a part of it with ``cut_marker`` of what was removed.
    """
    text = repair_surrogates(text)
    data = text.encode("utf-8")
    if len(data) <= limit:
        return text
    removed = len(data)
    kept = ""
    for _ in range(3):  # the marker's length depends on the number it names
        room = max(0, limit - len(cut_marker(removed).encode("utf-8")))
        part = data[len(data) - room :] if keep_end else data[:room]
        kept = part.decode("utf-8", errors="ignore")
        now = len(data) - len(kept.encode("utf-8"))
        if now == removed:
            break
        removed = now
    marker = cut_marker(removed)
    return marker + kept if keep_end else kept + marker


def bound_evidence(
    evidence: tuple[str, ...],
    *,
    entries: int = MAX_EVIDENCE_ENTRIES,
    entry_bytes: int = MAX_EVIDENCE_ENTRY_BYTES,
    total_bytes: int = MAX_EVIDENCE_BYTES,
) -> tuple[str, ...]:
    """``evidence`` with at most ``entries`` strings, each cut to ``entry_bytes`` and
    all together to about ``total_bytes`` (UTF-8); strings left out are named by one
    last marker (``… [cut: N more evidence strings]``)."""
    kept: list[str] = []
    room = total_bytes
    for index, text in enumerate(evidence):
        if index >= entries or room <= 0:
            kept.append(f"… [cut: {len(evidence) - index} more evidence strings]")
            break
        cut = cut_bytes(text, min(entry_bytes, room))
        kept.append(cut)
        room -= len(cut.encode("utf-8"))
    return tuple(kept)


def bound_report(report: ItemReport) -> ItemReport:
    """``report`` with its evidence and criterion ids cut to the caps above; the same
    report when nothing is over them."""
    evidence = bound_evidence(tuple(report.evidence))
    criteria = {
        cut_bytes(cid, MAX_CRITERION_ID_BYTES): ok
        for cid, ok in list(report.criteria.items())[:MAX_CRITERIA]
    }
    if evidence == tuple(report.evidence) and criteria == dict(report.criteria):
        return report
    return replace(report, evidence=evidence, criteria=criteria)


def item_line_bytes(item: WorkItem) -> int:
    """How long ``item``'s ``tasks.jsonl`` line is (compact UTF-8 JSON, no newline)."""
    line = json.dumps(item.to_json(), separators=(",", ":"), ensure_ascii=False)
    return len(line.encode("utf-8", errors="replace"))


def fit_item(item: WorkItem, limit: int = MAX_ITEM_LINE_BYTES) -> WorkItem:
    """``item`` with what an attempt wrote into it (``completion.evidence``,
    ``completion.feedback``, ``blocked_reason``, ``completion.surface_violations``) cut
    step by step until its line is at most ``limit`` bytes.

    Returns:
        ``item`` itself if it fits; else the cut copy, which may still be over
        ``limit`` only when the person's own fields (prompt, criteria) nearly fill it.
    """
    if item_line_bytes(item) <= limit:
        return item
    completion = item.completion
    steps = ((1024, 2048, 8, 50), (256, 512, 4, 10), (0, 128, 0, 3))
    fitted = item
    for entry_bytes, text_bytes, entries, paths in steps:
        evidence = bound_evidence(
            completion.evidence,
            entries=entries,
            entry_bytes=entry_bytes,
            total_bytes=entries * entry_bytes,
        )
        if not entries and completion.evidence:
            evidence = (f"… [cut: {len(completion.evidence)} more evidence strings]",)
        violations = completion.surface_violations[:paths]
        feedback = completion.feedback
        fitted = replace(
            item,
            completion=replace(
                completion,
                evidence=evidence,
                feedback=(
                    None if feedback is None else cut_bytes(feedback, text_bytes, keep_end=True)
                ),
                surface_violations=violations,
            ),
            blocked_reason=(
                None if item.blocked_reason is None else cut_bytes(item.blocked_reason, text_bytes)
            ),
        )
        if item_line_bytes(fitted) <= limit:
            return fitted
    return fitted
