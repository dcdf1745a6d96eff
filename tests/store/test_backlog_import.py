"""Work items from a Markdown checklist: nesting, and which complete on the agent's word."""

from __future__ import annotations

from autopilot.core.workitems import Criterion, ItemStatus, WorkItem
from autopilot.store.backlog_import import parse_markdown_checklist, unchecked

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
