"""The approved run boundary (``.autopilot/approved-run.json``) and allowed surfaces (pure).

The file is the Ghost-ALICE ``autopilot-mode`` addon's approved run state
(``schema_version: "autopilot-run.v1"``)::

    {"schema_version": "autopilot-run.v1", "run_id": "run-1", "approved": true,
     "status": "running", "scope": {"summary": "Implement the approved work plan"},
     "budget": {"remaining_steps": 3}, "allowed_surfaces": ["src/...", "tests/..."],
     "stop_conditions": ["budget_exhausted", "user_stop"],
     "approval_evidence": {"decision": "GO", "source": "user-confirmation"}}

It is in force when ``approved`` is true, ``status`` is ``running``,
``budget.remaining_steps`` is positive and ``scope``, ``allowed_surfaces``,
``stop_conditions`` and ``approval_evidence`` are not empty. Each iteration spends one
step. A surface is a path pattern relative to the work tree: ``src/...`` or ``src/``
(everything under ``src``), a glob (``*`` within a name, ``**`` across folders), or a
path (the file, or everything under the folder). Files under ``.autopilot/`` are the
run's own and never a violation.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from autopilot.core.item_text import surface_problem
from autopilot.core.structs import replace

SCHEMA_VERSION = "autopilot-run.v1"
OWN_FILES_PREFIX = ".autopilot/"


@dataclass(frozen=True)
class Boundary:
    """An approved run boundary.

    Attributes:
        run_id: The file's ``run_id`` (any text; not autopilot's run id).
        scope: What was approved (``scope.summary``, or the scope as text).
        remaining_steps: Iterations left.
        allowed_surfaces: Path patterns the run may change.
        stop_conditions: As approved (``budget_exhausted``, ``user_stop``, …).
        approval_evidence: Who approved it and how.
        data: The whole object, for writing it back with unknown fields kept.
    """

    run_id: str
    scope: str
    remaining_steps: int
    allowed_surfaces: tuple[str, ...]
    stop_conditions: tuple[str, ...]
    approval_evidence: Mapping[str, Any]
    data: Mapping[str, Any]

    def spend_step(self) -> Boundary:
        """The boundary after one more iteration (``remaining_steps`` - 1, not below 0)."""
        left = max(0, self.remaining_steps - 1)
        budget = dict(self.data.get("budget") or {})
        budget["remaining_steps"] = left
        return replace(self, remaining_steps=left, data={**self.data, "budget": budget})

    def to_json(self) -> dict[str, Any]:
        """The object as ``approved-run.json`` holds it."""
        return dict(self.data)


def parse_boundary(data: Any) -> tuple[Boundary | None, list[str]]:
    """Read ``approved-run.json``.

    Returns:
        ``(boundary, [])`` when it is in force, else ``(None, problems)`` with one line
        per reason it is not.
    """
    if not isinstance(data, Mapping):
        return None, ["approved-run.json must hold a JSON object"]
    problems: list[str] = []
    if data.get("approved") is not True:
        problems.append("approved is not true")
    if data.get("status") != "running":
        problems.append(f"status is {data.get('status')!r}, not 'running'")
    budget = data.get("budget")
    steps = budget.get("remaining_steps") if isinstance(budget, Mapping) else None
    if isinstance(steps, bool) or not isinstance(steps, int) or steps <= 0:
        problems.append("budget.remaining_steps is not a positive whole number")
    scope = data.get("scope")
    summary = scope.get("summary") if isinstance(scope, Mapping) else scope
    if not scope or not isinstance(summary, str | type(None)):
        problems.append("scope is empty")
    surfaces = _strings(data.get("allowed_surfaces"))
    if not isinstance(data.get("allowed_surfaces"), list | type(None)):
        problems.append("allowed_surfaces is not a list of paths")
    elif not surfaces:
        problems.append("allowed_surfaces is empty")
    problems.extend(
        f"allowed_surfaces: {problem}"
        for problem in map(surface_problem, surfaces)
        if problem is not None
    )
    conditions = _strings(data.get("stop_conditions"))
    if not conditions:
        problems.append("stop_conditions is empty")
    evidence = data.get("approval_evidence")
    if not isinstance(evidence, Mapping) or not evidence:
        problems.append("approval_evidence is empty")
    if problems:
        return None, problems
    assert isinstance(steps, int) and isinstance(evidence, Mapping)
    return (
        Boundary(
            run_id=str(data.get("run_id") or ""),
            scope=summary if isinstance(summary, str) and summary else str(scope),
            remaining_steps=steps,
            allowed_surfaces=surfaces,
            stop_conditions=conditions,
            approval_evidence=dict(evidence),
            data=dict(data),
        ),
        [],
    )


def _strings(value: Any) -> tuple[str, ...]:
    if not isinstance(value, list):
        return ()
    return tuple(v.strip() for v in value if isinstance(v, str) and v.strip())


def new_boundary(
    *, run_id: str, scope: str, steps: int, surfaces: Sequence[str], source: str
) -> Boundary:
    """A boundary approved now (``autopilot run --backlog --approve``)."""
    data = {
        "schema_version": SCHEMA_VERSION,
        "run_id": run_id,
        "approved": True,
        "status": "running",
        "scope": {"summary": scope},
        "budget": {"remaining_steps": steps},
        "allowed_surfaces": list(surfaces),
        "stop_conditions": ["budget_exhausted", "user_stop"],
        "approval_evidence": {"decision": "GO", "source": source},
    }
    boundary, problems = parse_boundary(data)
    if boundary is None:
        raise ValueError("; ".join(problems))
    return boundary


@lru_cache(maxsize=256)
def _pattern(surface: str) -> re.Pattern[str]:
    text = surface.strip().removeprefix("./")
    if text.endswith("/..."):
        text = text[:-4] + "/**"
    elif text.endswith("/"):
        text = text + "**"
    parts: list[str] = []
    index = 0
    while index < len(text):
        if text.startswith("**/", index):
            parts.append("(?:.*/)?")
            index += 3
        elif text.startswith("**", index):
            parts.append(".*")
            index += 2
        elif text[index] == "*":
            parts.append("[^/]*")
            index += 1
        elif text[index] == "?":
            parts.append("[^/]")
            index += 1
        else:
            parts.append(re.escape(text[index]))
            index += 1
    body = "".join(parts)
    # A plain path also covers everything under it.
    return re.compile(f"^{body}(?:/.*)?$")


def path_allowed(path: str, surfaces: Sequence[str]) -> bool:
    """True if ``path`` (relative to the work tree) falls in one of ``surfaces``.

    With no surfaces every path is allowed.
    """
    if not surfaces:
        return True
    clean = path.removeprefix("./")
    return any(_pattern(surface).match(clean) for surface in surfaces)


def surface_violations(
    changed_paths: Sequence[str],
    item_surface: Sequence[str],
    run_surface: Sequence[str],
) -> list[str]:
    """The changed paths outside the allowed surface (the item's, else the run's).

    Files under ``.autopilot/`` are the run's own and never count.
    """
    surfaces = item_surface or run_surface
    return [
        path
        for path in changed_paths
        if not path.startswith(OWN_FILES_PREFIX) and not path_allowed(path, surfaces)
    ]
