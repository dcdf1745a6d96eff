"""Work items from a Markdown checklist: nesting, and which complete on the agent's word."""

from __future__ import annotations

import json

import pytest

from autopilot.core.workitems import Criterion, ItemStatus, WorkItem
from autopilot.errors import BacklogError
from autopilot.store.backlog_import import parse_import, parse_markdown_checklist, unchecked

CHECKLIST = """\
# Plan
- [ ] Write the parser
  - [ ] parses the sample
  - [x] keeps comments
      - [ ] deeper still belongs to the parser
- [x] Set up the repo
	- [ ] a tab-indented criterion
* [ ] Write the printer
"""


def test_indented_checklist_lines_are_criteria_of_the_item_above() -> None:
    found = parse_markdown_checklist(CHECKLIST, "PLAN.md", ())
    assert [(i.id, i.prompt, i.status) for i in found.items] == [
        ("task-1", "Write the parser", ItemStatus.READY),
        ("task-2", "Set up the repo", ItemStatus.COMPLETED),
        ("task-3", "Write the printer", ItemStatus.READY),
    ]
    assert [c.text for c in found.items[0].acceptance_criteria] == [
        "parses the sample",
        "keeps comments",
        "deeper still belongs to the parser",
    ]
    assert [c.id for c in found.items[0].acceptance_criteria] == ["ac1", "ac2", "ac3"]
    assert [c.text for c in found.items[1].acceptance_criteria] == ["a tab-indented criterion"]
    assert found.items[2].acceptance_criteria == ()


def test_the_criteria_of_an_entry_already_in_the_backlog_are_skipped_with_it() -> None:
    found = parse_markdown_checklist(CHECKLIST, "PLAN.md", ("task-1",), {"Write the parser"})
    assert [(i.id, i.prompt) for i in found.items] == [
        ("task-2", "Set up the repo"),
        ("task-3", "Write the printer"),
    ]
    assert found.skipped == 1


def test_unchecked_names_the_open_items_that_complete_on_the_agents_word() -> None:
    checked = WorkItem(id="a", prompt="p", acceptance_criteria=(Criterion("ac1", "x", "true"),))
    half = WorkItem(
        id="b",
        prompt="p",
        acceptance_criteria=(Criterion("ac1", "x", "true"), Criterion("ac2", "y", plain=True)),
    )
    bare = WorkItem(id="c", prompt="p")
    done = WorkItem(id="d", prompt="p", status=ItemStatus.COMPLETED)
    assert unchecked([checked, half, bare, done]) == ["b", "c"]


def test_prd_json_depends_on_is_imported_as_the_items_ids() -> None:
    stories = [
        {"id": "US 3", "title": "Third", "priority": 1, "dependsOn": ["US-1", "US 2"]},
        {"id": "US-1", "title": "First", "priority": 2},
        {"id": "US 2", "title": "Second", "priority": 3, "dependsOn": ["US-0"]},
    ]
    existing = [WorkItem(id="done-0", prompt="Zeroth"), WorkItem(id="US-1", prompt="other")]
    stories.append({"id": "US-0", "title": "Zeroth", "priority": 0})  # already in the backlog
    data = json.dumps({"userStories": stories}).encode()
    found = parse_import(data, "prd.json", existing)
    assert found.skipped == 1
    assert [(i.id, i.depends_on) for i in found.items] == [
        ("US-3", ("task-1", "US-2")),
        ("task-1", ()),
        ("US-2", ("done-0",)),
    ]
    stories[1]["dependsOn"] = ["US-9"]
    with pytest.raises(BacklogError, match="story task-1 depends on 'US-9', which is neither"):
        parse_import(json.dumps({"userStories": stories}).encode(), "prd.json", existing)
