"""The marks an item's surface is checked against (``loop.backlog_marks``): what the
item's own iterations changed that still differs from the work tree as it started."""

from __future__ import annotations

from pathlib import Path

from autopilot.core.digest import sha256_hex
from autopilot.loop.backlog_marks import (
    ItemMark,
    checked_mark,
    concluded,
    forget_item_mark,
    logged_marks,
    mark_digest,
    mark_fields,
    note_started,
    read_item_mark,
    started,
    touched_paths,
    write_item_mark,
)
from autopilot.loop.mark_log import MAX_PACKED_MARK_BYTES
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


def test_the_marks_file_is_held_to_the_first_start_the_log_recorded() -> None:
    first, later = TreeMark("h", {"a": "1"}), TreeMark("h", {"a": "1", "b": "2"})
    opened = ItemMark("a", first, first)
    log = [
        {"type": "workitem_mark", "itemId": "a", **mark_fields(opened, 1, new=True)},
        {"type": "surface_violation", "itemId": "a", "paths": ["b"]},
        {"type": "workitem_end", "itemId": "a", "status": "reopened"},
        {
            "type": "workitem_mark",
            "itemId": "a",
            **mark_fields(ItemMark("a", later, later), 2, new=True),
        },
    ]
    logged = logged_marks(log, "a")
    assert (logged.start, logged.since, logged.outside) == (first, later, frozenset({"b"}))
    forged = ItemMark("a", later, later, ())
    held, notes = checked_mark(forged, logged, "a")
    assert held == ItemMark("a", first, later, ("b",))
    assert len(notes) == 1 and "item-marks/a.json" in notes[0]
    assert checked_mark(ItemMark("a", first, later, ("b",)), logged, "a") == (
        ItemMark("a", first, later, ("b",)),
        [],
    )
    # A closing end starts the item afresh: nothing logged since to hold the file to.
    closed = [*log, {"type": "workitem_end", "itemId": "a", "status": "completed"}]
    assert checked_mark(forged, logged_marks(closed, "a"), "a") == (forged, [])


def test_a_start_logged_as_its_digest_alone_leaves_a_forged_file_unused() -> None:
    # Random hashes: too large for a log line even compressed.
    big = TreeMark("h", {f"path-{n:05d}": sha256_hex(str(n).encode()) for n in range(400)})
    fields = mark_fields(ItemMark("a", big, big), 1, new=True)
    assert fields["start"] is None and fields["startDigest"] == mark_digest(big)
    assert "startZ" not in fields
    logged = logged_marks([{"type": "workitem_mark", "itemId": "a", **fields}], "a")
    small = TreeMark("h", {})
    held, notes = checked_mark(ItemMark("a", small, small), logged, "a")
    assert held is None and "holds only its digest" in notes[0]
    assert "cannot be checked, so its completion is not accepted" in notes[0]
    assert checked_mark(ItemMark("a", big, big), logged, "a") == (ItemMark("a", big, big), [])


def test_a_large_start_is_logged_compressed_and_holds_a_deleted_file_to_it() -> None:
    # 400 paths of 40 characters each: over 6 KiB as JSON, far less compressed.
    big = TreeMark("h", {f"junk/build-output-{n:05d}.txt": "x" * 40 for n in range(400)})
    fields = mark_fields(ItemMark("a", big, big), 1, new=True)
    assert fields["start"] is None and len(fields["startZ"]) <= MAX_PACKED_MARK_BYTES
    assert fields["since"] is None and fields["sinceZ"] is None  # the start's, not repeated
    logged = logged_marks([{"type": "workitem_mark", "itemId": "a", **fields}], "a")
    assert logged.start == big and logged.since == big
    held, notes = checked_mark(None, logged, "a")  # the file was deleted
    assert held == ItemMark("a", big, big) and "the logged one is used" in notes[0]
    damaged = {**fields, "startZ": "not base64 !"}
    logged = logged_marks([{"type": "workitem_mark", "itemId": "a", **damaged}], "a")
    assert logged.start is None and logged.start_digest == mark_digest(big)
