"""One line per event for the live view's timeline: what happened, briefly.

``describe_event`` gives the text after the time and the type (``format_event``
gives the full record, for plain output); ``EVENT_TONES`` colours the type.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from autopilot.view.figures import fmt_cost, fmt_count
from autopilot.view.plain import format_event, format_time
from autopilot.view.present import as_mapping, fmt_duration


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _get(event: Mapping[str, Any], key: str) -> Any:
    value = event.get(key)
    return value if value not in (None, "") else None


def _iteration_end(event: Mapping[str, Any]) -> str:
    parts = [f"iteration {event.get('iteration', '?')} {event.get('outcome') or 'ended'}"]
    if _num(event.get("durationMs")) is not None:
        parts.append(fmt_duration(event["durationMs"]))
    tokens = event.get("iterationTokens")
    if isinstance(tokens, Mapping):
        parts.append(f"{fmt_count(tokens.get('input'))}/{fmt_count(tokens.get('output'))} tok")
    if _num(event.get("iterationCostUsd")) is not None:
        parts.append(fmt_cost(event["iterationCostUsd"]))
    if _num(event.get("filesChanged")):
        parts.append(f"{int(event['filesChanged'])} files")
    if _num(event.get("commits")):
        parts.append(f"{int(event['commits'])} commits")
    if _get(event, "error"):
        parts.append(str(event["error"]))
    return " · ".join(parts)


def describe_event(event: Mapping[str, Any]) -> str:
    """A short, one-line account of an event for the timeline (no time, no type)."""
    kind = event.get("type")
    note = f" — {event['note']}" if _get(event, "note") else ""
    if kind == "iteration_start":
        return f"iteration {event.get('iteration', '?')} started"
    if kind == "iteration_end":
        return _iteration_end(event)
    if kind == "armed":
        agent = f", agent {event['agent']}" if _get(event, "agent") else ""
        return f"armed {event.get('label') or ''} (max {event.get('maxIterations') or '∞'}{agent})"
    if kind == "commit_observed":
        return f"{str(event.get('sha') or '')[:7]} {event.get('subject') or ''}"
    if kind == "usage_update":
        tokens = as_mapping(event.get("tokens"))
        cost = f" · {fmt_cost(event['costUsd'])}" if _num(event.get("costUsd")) else ""
        return f"{fmt_count(tokens.get('input'))} in / {fmt_count(tokens.get('output'))} out{cost}"
    if kind in ("complete", "abort"):
        return f"{event.get('reason') or kind}{note}"
    if kind == "stage_plan" and isinstance(event.get("stages"), list):
        return " › ".join(str(stage) for stage in event["stages"])
    if kind in ("stage_start", "stage_end"):
        name = event.get("stageName") or f"STAGE_{event.get('stage')}"
        outcome = f" {event['outcome']}" if _get(event, "outcome") else ""
        return f"{name}{outcome}"
    if kind == "substage":
        bits = [event.get("verb"), event.get("argsSummary"), event.get("outcome")]
        return " ".join(str(bit) for bit in bits if bit)
    if kind in ("task_start", "task_end"):
        desc = event.get("desc") or event.get("outcome") or ""
        return f"{event.get('stage')}.{event.get('sub')} {desc}"
    if kind in ("workitem_start", "workitem_end") and _get(event, "itemId"):
        # A backlog run's item: its title and what became of it.
        status = event.get("status") or "running"
        attempt = f", attempt {event['attempt']}" if _num(event.get("attempt")) else ""
        return f"{event.get('title') or event['itemId']} ({status}{attempt})"
    if kind == "workitem_recorded":
        item = as_mapping(event.get("item"))
        return f"{event.get('itemId')} recorded ({item.get('status') or '?'})"
    if kind == "surface_violation":
        paths = event.get("paths")
        shown = ", ".join(map(str, paths[:5])) if isinstance(paths, list) else "files"
        return f"{event.get('itemId')} changed {shown} outside its surface"
    if kind == "lane":
        # A parallel run's agent: started, took an item, or ended.
        what = {"ended": f"ended ({event.get('reason')})", "item": f"on {event.get('itemId')}"}
        doing = what.get(str(event.get("state")), "started")
        agent = f" ({event['agent']})" if _get(event, "agent") else ""
        return f"lane {event.get('lane')} {event.get('laneRun')} {doing}{agent}"
    if kind == "lane_merged":
        return f"{event.get('itemId')} merged into {event.get('runBranch')}"
    if kind == "merge_conflict":
        files = event.get("files")
        shown = ", ".join(map(str, files[:5])) if isinstance(files, list) else "files"
        return f"{event.get('itemId')} conflicts with {event.get('runBranch')} in {shown}"
    if kind == "backlog_verified":
        reopened = event.get("reopened")
        shown = ", ".join(map(str, reopened[:5])) if isinstance(reopened, list) else ""
        return "completed items' checks pass" if not shown else f"checks failed: reopened {shown}"
    if kind == "budget_extended":
        return str(event.get("note") or f"extended to {event.get('maxIterations')} iterations")
    if kind == "verify":
        results = event.get("results")
        shown = "; ".join(map(str, results[:3])) if isinstance(results, list) else ""
        return f"{'passed' if event.get('passed') is True else 'failed'}: {shown}"
    if kind == "gate":
        said = event.get("question") or event.get("answer") or ""
        return f"{event.get('state') or 'waiting'}: {said}"
    if kind in ("workitem_start", "workitem_end"):
        ref = f" #{event['ref']}" if _num(event.get("ref")) is not None else ""
        return f"{event.get('kind')}{ref} {event.get('title') or ''}".strip()
    if kind == "stagnation":
        return f"no progress streak {event.get('streak')} of {event.get('limit', '?')}"
    if kind == "rate_limited":
        until = _num(event.get("waitingUntil"))
        shown = f"until {format_time(until)[:8]}" if until is not None else "waiting"
        return f"{shown}{note}"
    if kind == "session_attached":
        return f"session {event.get('sessionId')}"
    if kind == "pause":
        return str(event.get("note") or "paused at the iteration boundary")
    if kind == "resume":
        return str(event.get("note") or "resumed")
    if kind == "task_list" and isinstance(event.get("items"), list):
        return f"{event.get('stage')}: {len(event['items'])} tasks"
    if kind in ("warning", "agent_error", "supervisor_giveup", "supervisor_restart"):
        return str(event.get("note") or "")
    text = format_event(event)
    _, _, rest = text.partition(" ")
    _, _, rest = rest.partition(" ")
    return rest


EVENT_TONES: dict[str, str] = {
    "complete": "ok",
    "commit_observed": "ok",
    "abort": "bad",
    "agent_error": "bad",
    "supervisor_giveup": "bad",
    "warning": "warn",
    "stagnation": "warn",
    "rate_limited": "warn",
    "pause": "warn",
    "iteration_start": "run",
    "iteration_end": "run",
}
"""Timeline colour per event type (others are plain)."""
