"""The work item shape and the ready queue (pure table tests)."""

from __future__ import annotations

from typing import Any

import pytest

from autopilot.core.ready_queue import backlog_problems, next_item, ready_queue, status_counts
from autopilot.core.workitems import (
    Criterion,
    FocusLayer,
    ItemFormatError,
    ItemStatus,
    WorkItem,
    item_from_json,
)

SEED_LINE = {
    "id": "unit-1",
    "status": "ready",
    "focus_layer": "micro",
    "depends_on": [],
    "prompt": "Implement unit 1",
    "acceptance_criteria": ["tests pass"],
    "allowed_surface": ["src/..."],
    "completion": {
        "state": "not_started",
        "verdict": None,
        "evidence": [],
        "completion_check_digest": None,
        "reopen_target": None,
    },
    "attempt": 0,
}


def test_the_seed_example_round_trips_unchanged() -> None:
    item = item_from_json(SEED_LINE)
    assert item.id == "unit-1"
    assert item.acceptance_criteria == (Criterion("ac1", "tests pass", plain=True),)
    assert item.to_json() == SEED_LINE


def test_unknown_fields_are_kept_on_a_round_trip() -> None:
    data = {**SEED_LINE, "owner": "ana", "completion": {**SEED_LINE["completion"], "x": [1]}}
    assert item_from_json(data).to_json() == data


def test_the_surface_violations_on_the_record_round_trip() -> None:
    completion = {**SEED_LINE["completion"], "surface_violations": ["secrets.txt", "etc/x"]}
    item = item_from_json({**SEED_LINE, "completion": completion})
    assert item.completion.surface_violations == ("secrets.txt", "etc/x")
    assert item.to_json() == {**SEED_LINE, "completion": completion}
    assert "surface_violations" not in item_from_json(SEED_LINE).to_json()["completion"]
    with pytest.raises(ItemFormatError, match=r"completion\.surface_violations must be a list"):
        item_from_json({**SEED_LINE, "completion": {"surface_violations": "secrets.txt"}})


def test_only_id_is_required() -> None:
    item = item_from_json({"id": "a"})
    assert (item.status, item.prompt, item.attempt, item.focus_layer) == (
        ItemStatus.READY,
        "",
        0,
        FocusLayer.MICRO,
    )


def test_criteria_as_strings_get_ids_by_position_and_objects_keep_theirs() -> None:
    item = item_from_json(
        {
            "id": "a",
            "acceptance_criteria": [
                "docs exist",
                {"id": "tests", "text": "tests pass", "check": "pytest -q"},
                {"text": "lint clean", "check": "  "},
            ],
        }
    )
    assert item.acceptance_criteria == (
        Criterion("ac1", "docs exist", plain=True),
        Criterion("tests", "tests pass", "pytest -q"),
        Criterion("ac3", "lint clean", None),
    )


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([1], "must be a JSON object"),
        ({"prompt": "x"}, "needs an 'id'"),
        ({"id": "../x"}, "id must be 1-64 letters"),
        ({"id": ""}, "id must be"),
        ({"id": "a", "status": "done"}, "status must be one of ready, running"),
        ({"id": "a", "depends_on": "b"}, "depends_on must be a list of strings"),
        ({"id": "a", "depends_on": ["b c"]}, "depends_on[] must be"),
        ({"id": "a", "attempt": -1}, "attempt must be a whole number"),
        ({"id": "a", "attempt": True}, "attempt must be a whole number"),
        ({"id": "a", "prompt": 3}, "prompt must be a string"),
        ({"id": "a", "acceptance_criteria": [3]}, "acceptance_criteria[0] must be"),
        ({"id": "a", "acceptance_criteria": ["x", {"id": "ac1"}]}, "'ac1' repeats"),
        ({"id": "a", "completion": {"verdict": "ok"}}, "completion.verdict must be one of"),
        ({"id": "a", "focus_layer": "nano"}, "focus_layer must be one of micro"),
    ],
)
def test_bad_items_are_refused_with_the_field_named(data: Any, message: str) -> None:
    with pytest.raises(ItemFormatError, match=None) as caught:
        item_from_json(data)
    assert message in str(caught.value)


def _items(*specs: tuple[str, str, tuple[str, ...]]) -> list[WorkItem]:
    return [WorkItem(id=i, status=ItemStatus(s), depends_on=d) for i, s, d in specs]


@pytest.mark.parametrize(
    ("specs", "ready"),
    [
        ([], []),
        ([("a", "ready", ())], ["a"]),
        ([("a", "reopened", ())], ["a"]),
        ([("a", s, ()) for s in ("running", "completed", "blocked", "stopped")], []),
        ([("a", "ready", ()), ("b", "ready", ("a",))], ["a"]),
        ([("a", "completed", ()), ("b", "ready", ("a",))], ["b"]),
        ([("a", "not_applicable", ()), ("b", "ready", ("a",))], ["b"]),
        ([("a", "stopped", ()), ("b", "ready", ("a",))], []),
        ([("a", "blocked", ()), ("b", "ready", ("a",)), ("c", "ready", ())], ["c"]),
        ([("b", "ready", ("zz",))], []),
        ([("a", "ready", ("b",)), ("b", "ready", ("a",)), ("c", "ready", ())], ["c"]),
        ([("a", "ready", ("a",))], []),
        ([("c", "ready", ()), ("a", "completed", ()), ("b", "reopened", ("a",))], ["c", "b"]),
        ([("a", "ready", ()), ("a", "ready", ()), ("b", "ready", ())], ["b"]),
    ],
)
def test_ready_queue(specs: list[tuple[str, str, tuple[str, ...]]], ready: list[str]) -> None:
    items = _items(*specs)
    queue = ready_queue(items)
    assert [item.id for item in queue] == ready
    # Items are never popped: deriving the queue changes nothing.
    assert _items(*specs) == items


def test_next_item_resumes_a_running_item_first() -> None:
    items = _items(("a", "ready", ()), ("b", "running", ()))
    assert next_item(items) == items[1]
    assert next_item(_items(("a", "completed", ()))) is None


def test_no_item_whose_id_is_used_twice_is_next() -> None:
    assert next_item(_items(("e", "ready", ()), ("e", "ready", ()))) is None
    assert next_item(_items(("e", "running", ()), ("e", "ready", ()))) is None


@pytest.mark.parametrize(
    ("specs", "expected"),
    [
        ([("a", "ready", ()), ("b", "ready", ("a",))], []),
        (
            [("a", "ready", ()), ("a", "completed", ())],
            [("duplicate_id", ("a",), "work item id 'a' is used twice")],
        ),
        (
            [("a", "ready", ("x", "y"))],
            [
                (
                    "unknown_dependency",
                    ("a", "x"),
                    "work item 'a' depends on 'x', which does not exist",
                ),
                (
                    "unknown_dependency",
                    ("a", "y"),
                    "work item 'a' depends on 'y', which does not exist",
                ),
            ],
        ),
        (
            [("a", "ready", ("b",)), ("b", "ready", ("c",)), ("c", "ready", ("a",))],
            [("dependency_cycle", ("a", "b", "c"), "dependency cycle: a -> b -> c -> a")],
        ),
        (
            [("s", "ready", ("s",))],
            [("dependency_cycle", ("s",), "dependency cycle: s -> s")],
        ),
        (
            [
                ("a", "ready", ("b",)),
                ("b", "ready", ("a",)),
                ("c", "ready", ("d",)),
                ("d", "ready", ("c", "a")),
            ],
            [
                ("dependency_cycle", ("a", "b"), "dependency cycle: a -> b -> a"),
                ("dependency_cycle", ("c", "d"), "dependency cycle: c -> d -> c"),
            ],
        ),
    ],
)
def test_backlog_problems_name_the_ids(
    specs: list[tuple[str, str, tuple[str, ...]]], expected: list[tuple[str, tuple[str, ...], str]]
) -> None:
    problems = backlog_problems(_items(*specs))
    assert [(p.kind, p.ids, p.message) for p in problems] == expected


def test_a_long_chain_has_no_cycle_and_no_recursion_limit() -> None:
    specs = [(f"i{n}", "ready", (f"i{n + 1}",)) for n in range(5000)]
    specs.append(("i5000", "ready", ()))
    items = _items(*specs)
    assert backlog_problems(items) == []
    assert [i.id for i in ready_queue(items)] == ["i5000"]


def test_status_counts_in_vocabulary_order() -> None:
    items = _items(("a", "completed", ()), ("b", "ready", ()), ("c", "ready", ()))
    assert list(status_counts(items).items()) == [("ready", 2), ("completed", 1)]


def test_label_uses_the_title_or_the_prompts_first_line() -> None:
    assert WorkItem(id="a", title="Docs").label() == "a: Docs"
    assert WorkItem(id="a", prompt="\nWrite docs\nmore").label() == "a: Write docs"
    assert WorkItem(id="a").label() == "a"
