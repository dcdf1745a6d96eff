"""A promoted ``.autopilot/consistency-decision.json`` as an ``ItemReport`` (pure).

The schema is the Ghost-ALICE ``autopilot-mode`` addon's promoted consistency
decision (``schema_version: "autopilot-consistency-decision.v1"``): ``decision_id``,
``work_item_id``, ``decision``, ``promotion_state: "promoted"``,
``promotion_evidence`` {``decision``: go, approve, approved, promote, promoted or
direct; ``source``}, ``candidate_id``, ``governance_signal_digest``,
``decision_key``, ``state_hash``, ``loop_key`` and ``evidence`` (strings). A
``continue_next`` also needs ``verdict: "pass"``, ``completion_check_digest`` as
``sha256:<64 hex>``, and evidence strings holding ``[completion-check]``,
``acceptance-criteria`` and ``claim-evidence-map`` entries naming criterion ids; each
criterion named there counts as claimed to pass (autopilot still runs the checks).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from autopilot.core.item_report import ItemDecision, ItemReport
from autopilot.core.workitems import WorkItem

SCHEMA_VERSION = "autopilot-consistency-decision.v1"
PROMOTION_DECISIONS = frozenset({"go", "approve", "approved", "promote", "promoted", "direct"})
_REQUIRED_TEXT = (
    "decision_id",
    "work_item_id",
    "decision",
    "candidate_id",
    "governance_signal_digest",
    "decision_key",
    "state_hash",
    "loop_key",
)
_DIGEST_RE = re.compile(r"^sha256:[0-9a-f]{64}$")


def report_from_decision_file(
    data: Any, item: WorkItem | None
) -> tuple[ItemReport | None, list[str]]:
    """Read a consistency decision.

    Args:
        data: The parsed JSON of the file.
        item: The work item it names, if there is one (for its criterion ids).

    Returns:
        ``(report, [])`` when it is a valid promoted decision, else
        ``(None, problems)`` with one line per problem.
    """
    if not isinstance(data, Mapping):
        return None, ["consistency-decision.json must hold a JSON object"]
    problems: list[str] = []
    if data.get("schema_version") != SCHEMA_VERSION:
        problems.append(f"schema_version must be {SCHEMA_VERSION!r}")
    if data.get("promotion_state") != "promoted":
        problems.append("promotion_state must be 'promoted'")
    for key in _REQUIRED_TEXT:
        if not isinstance(data.get(key), str) or not data[key].strip():
            problems.append(f"{key} must be a non-empty string")
    promotion = data.get("promotion_evidence")
    if not isinstance(promotion, Mapping) or promotion.get("decision") not in PROMOTION_DECISIONS:
        problems.append(
            "promotion_evidence.decision must be one of " + ", ".join(sorted(PROMOTION_DECISIONS))
        )
    elif not isinstance(promotion.get("source"), str) or not promotion["source"].strip():
        problems.append("promotion_evidence.source must be a non-empty string")
    evidence = data.get("evidence")
    if not isinstance(evidence, list) or not all(isinstance(e, str) for e in evidence):
        problems.append("evidence must be a JSON array of strings")
        evidence = []
    try:
        decision = ItemDecision(str(data.get("decision")))
    except ValueError:
        problems.append("decision must be one of " + ", ".join(d.value for d in ItemDecision))
        return None, problems
    criteria: dict[str, bool] = {}
    if decision is ItemDecision.CONTINUE_NEXT:
        problems.extend(_continue_next_problems(data, evidence))
        text = "\n".join(evidence)
        ids = [c.id for c in item.acceptance_criteria] if item is not None else []
        criteria = {cid: True for cid in ids if re.search(rf"\b{re.escape(cid)}\b", text)}
    if problems:
        return None, problems
    report = ItemReport(
        item_id=str(data["work_item_id"]),
        decision=decision,
        criteria=criteria,
        evidence=tuple(evidence),
        source="decision-file",
    )
    return report, []


def _continue_next_problems(data: Mapping[str, Any], evidence: list[str]) -> list[str]:
    problems = []
    if data.get("verdict") != "pass":
        problems.append("continue_next needs verdict 'pass' at top level")
    digest = data.get("completion_check_digest")
    if not isinstance(digest, str) or not _DIGEST_RE.match(digest):
        problems.append("continue_next needs completion_check_digest as sha256:<64 hex>")
    text = "\n".join(evidence)
    for needed in ("[completion-check]", "acceptance-criteria", "claim-evidence-map"):
        if needed not in text:
            problems.append(f"continue_next needs {needed} in the evidence strings")
    return problems
