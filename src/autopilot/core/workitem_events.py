"""The events a backlog run writes, and the backlog rebuilt from them (pure).

The Node tool's reader (``docs/formats.md``) folds ``workitem_start`` and
``workitem_end`` only with ``kind`` in ``issue``, ``pr``, ``red_ci`` and a numeric or
absent ``ref``, and ``backlog_snapshot`` as four counts; so autopilot writes a work item
as ``kind: "issue"`` without ``ref``, ``title`` ``"<id>: <title>"`` (≤ 200 characters),
and the counts as ``openIssues`` (open items) and ``closedByLoop`` (completed items).
Its own fields ride along:

* ``workitem_start``: ``itemId``, ``attempt``, ``iteration``, ``focusLayer``;
* ``workitem_end``: ``itemId``, ``status`` (the item's new status), ``decision``,
  ``attempt``, ``iteration``, ``verdict``, ``completionCheckDigest``; ``closesN`` 1
  when the item was completed (the Node tool counts it in ``closedByLoop``);
* ``backlog_snapshot``: ``counts`` (items per status) and ``items`` (``id``,
  ``status``, ``attempt`` of each, in file order; ``itemsTruncated`` if cut);
* ``workitem_recorded`` (autopilot's type): ``itemId`` and ``item``, the whole
  ``tasks.jsonl`` object, written when autopilot first sees an item and whenever it
  or a person changes it. With the last ``backlog_snapshot`` it is enough to write
  ``tasks.jsonl`` again from the log alone (``rebuild_items``).

Fields are returned without ``type``/``ts``/``runId``; the event log adds those.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from autopilot.core.ready_queue import open_items, status_counts
from autopilot.core.text import excerpt
from autopilot.core.workitems import ItemStatus, WorkItem

WORKITEM_KIND = "issue"
"""The Node tool's ``kind`` a work item is written as."""

MAX_TITLE_UTF16_UNITS = 200
MAX_SNAPSHOT_ITEMS = 150
"""``backlog_snapshot.items`` lists at most this many items (a line must fit 16 KiB)."""


def _title(item: WorkItem) -> str:
    return excerpt(" ".join(item.label().split()), MAX_TITLE_UTF16_UNITS)


def workitem_start_fields(item: WorkItem, iteration: int) -> dict[str, Any]:
    """``workitem_start`` for the item an iteration takes (already ``running``)."""
    return {
        "kind": WORKITEM_KIND,
        "title": _title(item),
        "itemId": item.id,
        "attempt": item.attempt,
        "iteration": iteration,
        "focusLayer": item.focus_layer.value,
    }


def workitem_end_fields(item: WorkItem, iteration: int, decision: str | None) -> dict[str, Any]:
    """``workitem_end`` for the item after its decision (``decision`` None: missing)."""
    fields: dict[str, Any] = {
        "kind": WORKITEM_KIND,
        "title": _title(item),
        "itemId": item.id,
        "status": item.status.value,
        "decision": decision,
        "attempt": item.attempt,
        "iteration": iteration,
        "verdict": item.completion.verdict.value if item.completion.verdict else None,
        "completionCheckDigest": item.completion.completion_check_digest,
    }
    if item.status is ItemStatus.COMPLETED:
        fields["closesN"] = 1
    if item.status is ItemStatus.BLOCKED and item.blocked_reason:
        fields["blockedReason"] = item.blocked_reason
    return fields


def backlog_snapshot_fields(items: Sequence[WorkItem]) -> dict[str, Any]:
    """``backlog_snapshot`` for the backlog as it is now."""
    listed = [
        {"id": item.id, "status": item.status.value, "attempt": item.attempt}
        for item in items[:MAX_SNAPSHOT_ITEMS]
    ]
    fields: dict[str, Any] = {
        "openIssues": len(open_items(items)),
        "closedByLoop": sum(1 for item in items if item.status is ItemStatus.COMPLETED),
        "counts": status_counts(items),
        "items": listed,
    }
    if len(items) > MAX_SNAPSHOT_ITEMS:
        fields["itemsTruncated"] = True
    return fields


def workitem_recorded_fields(item: WorkItem) -> dict[str, Any]:
    """``workitem_recorded``: the whole item, as ``tasks.jsonl`` holds it."""
    return {"itemId": item.id, "item": item.to_json()}


def rebuild_items(events: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The backlog as the run's log last knew it, as ``tasks.jsonl`` objects.

    Each item is its newest ``workitem_recorded`` with the status and attempt of any
    later ``workitem_end`` or ``backlog_snapshot``; the newest complete
    ``backlog_snapshot`` decides which items exist and their order (otherwise the
    order in which they were first recorded).

    Args:
        events: The run's events, oldest first.

    Returns:
        Item objects in file order; [] if the log recorded none.
    """
    records: dict[str, dict[str, Any]] = {}
    order: list[str] | None = None
    for event in events:
        kind = event.get("type")
        if kind == "workitem_recorded":
            item = event.get("item")
            if isinstance(item, dict) and isinstance(item.get("id"), str):
                records[item["id"]] = dict(item)
        elif kind == "workitem_end":
            _set_status(records, event.get("itemId"), event.get("status"), event.get("attempt"))
        elif kind == "backlog_snapshot":
            listed = event.get("items")
            if not isinstance(listed, list):
                continue
            for entry in listed:
                if isinstance(entry, dict):
                    _set_status(records, entry.get("id"), entry.get("status"), entry.get("attempt"))
            if not event.get("itemsTruncated"):
                order = [e["id"] for e in listed if isinstance(e, dict) and "id" in e]
    ids = list(records) if order is None else [i for i in order if i in records]
    return [records[item_id] for item_id in ids]


def _set_status(
    records: dict[str, dict[str, Any]], item_id: Any, status: Any, attempt: Any
) -> None:
    record = records.get(item_id) if isinstance(item_id, str) else None
    if record is None:
        return
    if status in ItemStatus._value2member_map_:
        record["status"] = status
    if isinstance(attempt, int) and not isinstance(attempt, bool) and attempt >= 0:
        record["attempt"] = attempt
