"""The marks an item's surface is checked against (``loop.backlog_marks``): what the
item's own iterations changed that still differs from the work tree as it started."""

from __future__ import annotations

from pathlib import Path

from autopilot.loop.backlog_marks import (
    ItemMark,
    concluded,
    forget_item_mark,
    note_started,
    read_item_mark,
    started,
    touched_paths,
    write_item_mark,
)
from autopilot.workspace.git import TreeMark
from tests.fakes import FakeWorkspace


def _tree(*touched: str) -> FakeWorkspace:
    tree = FakeWorkspace()
    tree.touched = set(touched)
    return tree


def test_an_undo_is_no_change_and_a_change_left_there_stays_one() -> None:
    tree = _tree()
    item = started(None, "a", tree.mark())
    assert item is not None
    tree.touched = {"secrets.txt"}
    paths, _ = touched_paths(item, ["secrets.txt"], tree)
    assert paths == ["secrets.txt"]
    item = concluded(item, paths)
    # Left there, not touched again: still outside (kept from the last conclusion).
    assert touched_paths(item, [], tree)[0] == ["secrets.txt"]
    # Undone: the iteration changed it, but it is as the item found it.
    tree.touched = set()
    assert touched_paths(item, ["secrets.txt"], tree)[0] == []


def test_what_others_changed_between_the_items_iterations_is_not_the_items() -> None:
    tree = _tree()
    item = concluded(ItemMark("a", tree.mark()), [])
    tree.touched = {"b.txt"}  # another item's work, or a person's edit, in between
    item = started(item, "a", tree.mark())
    assert item is not None
    tree.touched = {"b.txt", "a.txt"}
    assert touched_paths(item, ["a.txt"], tree)[0] == ["a.txt"]


def test_an_iteration_never_concluded_still_counts_through_since() -> None:
    tree = _tree()
    item = started(None, "a", tree.mark())
    tree.touched = {"stray.txt"}  # an iteration a usage limit cut short: not concluded
    resumed = started(item, "a", tree.mark())
    assert resumed == item  # ``since`` stays the first unconcluded iteration's
    assert touched_paths(resumed, [], tree)[0] == ["stray.txt"]


def test_unknown_marks_fall_back_to_the_iterations_paths(tmp_path: Path) -> None:
    outside = _tree()
    outside.repository = False
    assert started(None, "a", outside.mark()) is None
    item = ItemMark("a", _tree().mark())
    assert touched_paths(item, ["x", "a"], outside) == (["a", "x"], None)
    assert touched_paths(None, ["x"], _tree("y")) == (["x"], None)


def test_the_marks_are_kept_in_the_run_folder_and_dropped(tmp_path: Path) -> None:
    mark = TreeMark("abc", {"f.txt": "1"}, "main")
    note_started(tmp_path, "a", mark)
    kept = read_item_mark(tmp_path, "a")
    assert kept == ItemMark("a", mark, mark)
    write_item_mark(tmp_path, concluded(kept, ["s.txt"]))
    assert read_item_mark(tmp_path, "a") == ItemMark("a", mark, None, ("s.txt",))
    assert (tmp_path / "item-marks" / "a.json").stat().st_mode & 0o777 == 0o600
    assert read_item_mark(tmp_path, "b") is None
    (tmp_path / "item-marks" / "b.json").write_text('{"itemId": "a", "start": {}}')
    assert read_item_mark(tmp_path, "b") is None  # not b's
    (tmp_path / "item-marks" / "c.json").write_text("{torn")
    assert read_item_mark(tmp_path, "c") is None
    forget_item_mark(tmp_path, "a")
    forget_item_mark(tmp_path, "a")
    assert read_item_mark(tmp_path, "a") is None
