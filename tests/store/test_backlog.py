"""tasks.jsonl on disk: malformed lines kept, atomic locked writes, bounded reads."""

from __future__ import annotations

import json
import multiprocessing
import os
from pathlib import Path

import pytest

from autopilot.core.workitems import ItemStatus, WorkItem
from autopilot.errors import BacklogError
from autopilot.store.backlog import (
    MAX_ITEM_LINE_BYTES,
    Backlog,
    BacklogFile,
    MalformedLine,
    encode_backlog,
    parse_backlog,
)

GOOD = b'{"id":"a","status":"ready","prompt":"one"}'


def test_malformed_lines_are_reported_with_their_numbers_and_kept_verbatim() -> None:
    data = b"\n".join(
        [
            GOOD,
            b"",
            b"{not json",
            b'{"id":"b","status":"done"}',
            b"\xff\xfe",
            b'{"id":"c","depends_on":["a"]}',
            b"x" * (MAX_ITEM_LINE_BYTES + 1),
        ]
    )
    backlog = parse_backlog(data + b"\n")
    assert [i.id for i in backlog.items] == ["a", "c"]
    assert [(m.number, m.error.split(" (")[0]) for m in backlog.malformed] == [
        (3, "not valid JSON"),
        (
            4,
            "status must be one of ready, running, completed, reopened, blocked, stopped, "
            "not_applicable; got 'done'",
        ),
        (5, "not valid UTF-8"),
        (7, "longer than 12 KiB; put long instructions in a file and name it in the prompt"),
    ]
    assert backlog.problems()[0] == ".autopilot/tasks.jsonl line 3: not valid JSON " + (
        backlog.malformed[0].error.removeprefix("not valid JSON ")
    )
    # Writing it back changes no malformed byte (the blank line alone goes).
    out = encode_backlog(backlog)
    assert b"{not json\n" in out
    assert b'{"id":"b","status":"done"}\n' in out
    assert b"\xff\xfe\n" in out
    assert out.count(b"\n") == 6


def test_problems_name_duplicates_unknown_dependencies_and_cycles() -> None:
    data = b"\n".join(
        [
            b'{"id":"a","depends_on":["b"]}',
            b'{"id":"b","depends_on":["a"]}',
            b'{"id":"a"}',
            b'{"id":"c","depends_on":["zz"]}',
        ]
    )
    assert parse_backlog(data).problems() == [
        "work item id 'a' is used twice",
        "work item 'c' depends on 'zz', which does not exist",
        "dependency cycle: a -> b -> a",
    ]


def test_items_round_trip_through_the_file_with_unknown_fields(tmp_path: Path) -> None:
    line = {"id": "a", "status": "ready", "prompt": "p", "owner": {"name": "ana"}}
    (tmp_path / ".autopilot").mkdir()
    (tmp_path / ".autopilot" / "tasks.jsonl").write_text(json.dumps(line) + "\n")
    backlog = Backlog(tmp_path, tmp_path / "locks")
    written = backlog.update(lambda b: b.replace_item(b.items[0].with_status(ItemStatus.RUNNING)))
    again = backlog.read()
    assert again.items == written.items
    raw = json.loads((tmp_path / ".autopilot" / "tasks.jsonl").read_text())
    assert raw["owner"] == {"name": "ana"}
    assert raw["status"] == "running"


def test_a_missing_file_reads_empty_and_update_creates_it(tmp_path: Path) -> None:
    backlog = Backlog(tmp_path, tmp_path / "locks")
    assert backlog.read() == BacklogFile((), exists=False)
    backlog.update(lambda b: b.append([WorkItem(id="x", prompt="do x")]))
    assert [i.id for i in backlog.read().items] == ["x"]
    leftovers = [p.name for p in (tmp_path / ".autopilot").iterdir()]
    assert leftovers == ["tasks.jsonl"]


def test_an_unchanged_update_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / ".autopilot" / "tasks.jsonl"
    path.parent.mkdir()
    path.write_bytes(b'{"id":"a"}  \n')
    Backlog(tmp_path, tmp_path / "locks").update(lambda b: b)
    assert path.read_bytes() == b'{"id":"a"}  \n'


def test_a_fifo_is_never_opened_and_a_symlink_is_not_followed(tmp_path: Path) -> None:
    folder = tmp_path / ".autopilot"
    folder.mkdir()
    os.mkfifo(folder / "tasks.jsonl")
    backlog = Backlog(tmp_path, tmp_path / "locks")
    with pytest.raises(BacklogError, match="not a regular file"):
        backlog.read()
    (folder / "tasks.jsonl").unlink()
    (tmp_path / "elsewhere.jsonl").write_bytes(GOOD)
    (folder / "tasks.jsonl").symlink_to(tmp_path / "elsewhere.jsonl")
    with pytest.raises(BacklogError, match="cannot read"):
        backlog.read()


def test_a_huge_file_is_refused_in_one_line(tmp_path: Path) -> None:
    folder = tmp_path / ".autopilot"
    folder.mkdir()
    with (folder / "tasks.jsonl").open("wb") as handle:
        handle.truncate(9 * 1024 * 1024)
    with pytest.raises(BacklogError, match="larger than 8 MiB"):
        Backlog(tmp_path, tmp_path / "locks").read()


def test_a_failed_write_leaves_the_file_as_it_was(tmp_path: Path) -> None:
    path = tmp_path / ".autopilot" / "tasks.jsonl"
    path.parent.mkdir()
    path.write_bytes(GOOD + b"\n")
    backlog = Backlog(tmp_path, tmp_path / "locks")
    huge = WorkItem(id="big", prompt="x" * (MAX_ITEM_LINE_BYTES + 10))
    with pytest.raises(BacklogError, match="would be over 12 KiB"):
        backlog.update(lambda b: b.append([huge]))
    assert path.read_bytes() == GOOD + b"\n"
    assert sorted(p.name for p in path.parent.iterdir()) == ["tasks.jsonl"]


def test_replacing_an_unknown_item_is_refused() -> None:
    with pytest.raises(BacklogError, match="no work item 'zz'"):
        parse_backlog(GOOD).replace_item(WorkItem(id="zz"))


def test_malformed_line_describe_names_the_file() -> None:
    assert MalformedLine(2, b"x", "why").describe() == ".autopilot/tasks.jsonl line 2: why"


def _add_items(project: str, locks: str, start: int) -> None:
    backlog = Backlog(Path(project), Path(locks))
    for n in range(start, start + 20):
        backlog.update(lambda b, n=n: b.append([WorkItem(id=f"i{n}")]))


def test_concurrent_writers_lose_no_item(tmp_path: Path) -> None:
    context = multiprocessing.get_context("fork")
    workers = [
        context.Process(target=_add_items, args=(str(tmp_path), str(tmp_path / "locks"), k * 100))
        for k in range(4)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(60)
        assert worker.exitcode == 0
    ids = {i.id for i in Backlog(tmp_path, tmp_path / "locks").read().items}
    assert ids == {f"i{k * 100 + n}" for k in range(4) for n in range(20)}


def test_a_change_rewrites_only_the_line_it_meant(tmp_path: Path) -> None:
    backlog = Backlog(tmp_path, tmp_path / "locks")
    backlog.path.parent.mkdir()
    lines = [b'{"id": "e", "prompt": "first"}', b'{"id":"e","prompt":"second, keep me"}']
    lines.append(b'{ "id":"f",  "prompt":"other" }')
    backlog.path.write_bytes(b"\n".join(lines) + b"\n")
    found = backlog.read()
    assert found.duplicate_ids == ["e"]
    assert found.hold() == [
        ".autopilot/tasks.jsonl: work item id 'e' is used twice; give each item its own id"
    ]
    with pytest.raises(BacklogError, match="'e' is used twice"):
        found.replace_item(found.items[0].with_status(ItemStatus.BLOCKED))

    backlog.update(lambda f: f.replace_item(f.items[2].with_status(ItemStatus.BLOCKED)))

    written = backlog.path.read_bytes().split(b"\n")
    assert written[:2] == lines[:2]
    assert json.loads(written[2])["status"] == "blocked"


def test_a_hand_written_surface_outside_the_project_or_a_lone_surrogate_is_a_malformed_line() -> (
    None
):
    data = b"\n".join(
        [
            GOOD,
            b'{"id":"b","allowed_surface":["src/", "/etc/passwd"]}',
            b'{"id":"c","allowed_surface":["../x"]}',
            b'{"id":"d","prompt":"fix \\ud800 it"}',
            b'{"id":"e","acceptance_criteria":[{"id":"ac1","text":"t","check":"\\udcff"}]}',
            b'{"id":"f","allowed_surface":["src/...", "docs/*.md", "./tests/"]}',
        ]
    )
    backlog = parse_backlog(data + b"\n")
    assert [i.id for i in backlog.items] == ["a", "f"]
    assert [m.describe() for m in backlog.malformed] == [
        ".autopilot/tasks.jsonl line 2: allowed_surface: '/etc/passwd' is not relative to the "
        "project; a surface is a path or glob relative to the project root",
        ".autopilot/tasks.jsonl line 3: allowed_surface: '../x' leaves the project (..); a "
        "surface is a path or glob relative to the project root",
        ".autopilot/tasks.jsonl line 4: prompt has a lone surrogate (U+D800) at character 5, "
        "which is not text",
        ".autopilot/tasks.jsonl line 5: acceptance_criteria[0].check has a byte that is not "
        "UTF-8 (0xFF) at character 1, which is not text",
    ]
    assert backlog.hold()[0].startswith(".autopilot/tasks.jsonl line 2: ")
