"""The approved run boundary and allowed surfaces (pure table tests)."""

from __future__ import annotations

from typing import Any

import pytest

from autopilot.core.boundary import (
    new_boundary,
    parse_boundary,
    path_allowed,
    surface_violations,
)

SEED_EXAMPLE: dict[str, Any] = {
    "schema_version": "autopilot-run.v1",
    "run_id": "run-1",
    "approved": True,
    "status": "running",
    "scope": {"summary": "Implement the approved work plan"},
    "budget": {"remaining_steps": 3},
    "allowed_surfaces": ["src/...", "tests/..."],
    "stop_conditions": ["budget_exhausted", "user_stop"],
    "approval_evidence": {"decision": "GO", "source": "user-confirmation"},
}


def test_the_seed_example_is_in_force_and_spends_steps() -> None:
    boundary, problems = parse_boundary(SEED_EXAMPLE)
    assert problems == [] and boundary is not None
    assert boundary.scope == "Implement the approved work plan"
    assert boundary.allowed_surfaces == ("src/...", "tests/...")
    spent = boundary.spend_step().spend_step().spend_step().spend_step()
    assert spent.remaining_steps == 0
    assert spent.to_json()["budget"] == {"remaining_steps": 0}
    assert spent.to_json()["schema_version"] == "autopilot-run.v1"
    assert parse_boundary(spent.to_json())[0] is None


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"approved": False}, "approved is not true"),
        ({"status": "stopped"}, "status is 'stopped', not 'running'"),
        ({"budget": {"remaining_steps": 0}}, "budget.remaining_steps is not a positive"),
        ({"budget": {"remaining_steps": True}}, "budget.remaining_steps is not a positive"),
        ({"scope": {}}, "scope is empty"),
        ({"allowed_surfaces": []}, "allowed_surfaces is empty"),
        ({"allowed_surfaces": "src/"}, "allowed_surfaces is not a list of paths"),
        (
            {"allowed_surfaces": ["src/", "/etc"]},
            "allowed_surfaces: '/etc' is not relative to the project",
        ),
        ({"allowed_surfaces": ["../up"]}, "allowed_surfaces: '../up' leaves the project (..)"),
        ({"stop_conditions": [" "]}, "stop_conditions is empty"),
        ({"approval_evidence": {}}, "approval_evidence is empty"),
    ],
)
def test_a_boundary_not_in_force_says_why(change: dict[str, Any], problem: str) -> None:
    boundary, problems = parse_boundary({**SEED_EXAMPLE, **change})
    assert boundary is None
    assert problems == [problem] or problem in problems[0]


@pytest.mark.parametrize(
    ("path", "surfaces", "allowed"),
    [
        ("src/a/b.py", ["src/..."], True),
        ("src", ["src/..."], False),
        ("srcx/a.py", ["src/..."], False),
        ("tests/x.py", ["src/"], False),
        ("src/x.py", ["src/"], True),
        ("docs/a.md", ["docs/*.md"], True),
        ("docs/sub/a.md", ["docs/*.md"], False),
        ("docs/sub/a.md", ["docs/**/*.md"], True),
        ("docs/a.md", ["docs/**/*.md"], True),
        ("README.md", ["README.md"], True),
        ("README.md.bak", ["README.md"], False),
        ("lib/x/y", ["lib"], True),
        ("anything", [], True),
        ("a+b(c).txt", ["a+b(c).txt"], True),
    ],
)
def test_path_allowed(path: str, surfaces: list[str], allowed: bool) -> None:
    assert path_allowed(path, surfaces) is allowed


def test_violations_use_the_items_surface_else_the_runs_and_skip_own_files() -> None:
    changed = ["src/a.py", "secrets.txt", ".autopilot/consistency-decision.json", "docs/x.md"]
    assert surface_violations(changed, ["src/..."], ["docs/..."]) == ["secrets.txt", "docs/x.md"]
    assert surface_violations(changed, [], ["docs/..."]) == ["src/a.py", "secrets.txt"]
    assert surface_violations(changed, [], []) == []


def test_new_boundary_is_in_force() -> None:
    boundary = new_boundary(
        run_id="r-1",
        scope="the backlog",
        steps=5,
        surfaces=["src/"],
        source="autopilot run --approve",
    )
    assert parse_boundary(boundary.to_json())[0] == boundary
    with pytest.raises(ValueError, match="allowed_surfaces is empty"):
        new_boundary(run_id="r", scope="s", steps=1, surfaces=[], source="x")
