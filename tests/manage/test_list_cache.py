"""``list`` and ``stats`` over a ``finished.json`` that is stale, missing or corrupt give
the answers of a fresh read and rewrite it; a live run with nothing pending is listed
from its ``state.json`` as plain JSON, as the typed reader lists it; what a row shows
is redacted and escaped value by value."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from autopilot.cli import list_body
from autopilot.cli.list_body import list_runs
from autopilot.store.finished import FINISHED_FILE
from autopilot.store.index import append_index_row
from autopilot.store.project_files import off_path
from autopilot.view.stats import aggregate, collect
from tests.manage.runs import (
    alive_driver,
    cache_parts,
    dead_driver,
    make_run,
    now_ms,
    write_cache_parts,
)


def _listed(capsys: pytest.CaptureFixture[str], *, as_json: bool = False) -> str:
    assert list_runs(as_json, None) == 0
    return capsys.readouterr().out


def _root(tmp_path: Path) -> tuple[Path, list[str]]:
    root = tmp_path / "runs"
    start = now_ms() - 10_000_000
    ids = [
        make_run(root, "docs", start, terminal=("complete", "completion_promise"), iterations=3),
        make_run(root, "api", start + 1, terminal=("abort", "max_iterations"), iterations=10),
        make_run(root, "api", start + 2, iterations=1, state=dead_driver()),
    ]
    return root, ids


def test_a_missing_cache_is_built_again_with_the_same_answers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root, ids = _root(tmp_path)
    fresh_list, fresh_json = _listed(capsys), _listed(capsys, as_json=True)
    fresh_stats = aggregate(collect(root))
    (root / FINISHED_FILE).unlink()
    assert _listed(capsys) == fresh_list
    assert set(cache_parts(root)["list"]["runs"]) == set(ids)
    (root / FINISHED_FILE).unlink()
    assert aggregate(collect(root)) == fresh_stats
    assert _listed(capsys, as_json=True) == fresh_json


@pytest.mark.parametrize(
    "damage",
    [
        lambda runs, run_id, part: runs[run_id].__setitem__(
            0, ["completed"] if part == "list" else "a summary"
        ),
        lambda runs, run_id, part: runs[run_id].__setitem__(
            0, "running" if part == "list" else [1, 2, 3]
        ),
        lambda runs, run_id, part: runs[run_id].__setitem__(0, None),
        lambda runs, run_id, part: runs[run_id].__setitem__(slice(1, None), ["not a key"]),
        lambda runs, run_id, part: runs.__setitem__(run_id, []),
        lambda runs, run_id, part: runs.__setitem__(run_id, {"value": "not a list"}),
    ],
)
def test_a_corrupt_entry_never_hides_a_run_it_is_read_afresh_and_rewritten(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], damage: object
) -> None:
    root, ids = _root(tmp_path)
    fresh_list, fresh_stats = _listed(capsys), aggregate(collect(root))
    parts = cache_parts(root)
    for part in parts.values():
        for run_id in list(part["runs"]):
            damage(part["runs"], run_id, part["part"])  # type: ignore[operator]
        part["runs"]["not-a-run-1796000000000"] = [["x"] * 5, 1, 2, 3]
    write_cache_parts(root, parts)
    assert _listed(capsys) == fresh_list
    assert aggregate(collect(root)) == fresh_stats
    rewritten = cache_parts(root)
    assert all(set(rewritten[part]["runs"]) == set(ids) for part in ("list", "stats"))
    assert all(len(entry[0]) == 5 for entry in rewritten["list"]["runs"].values())
    assert all(len(entry[0]) == 10 for entry in rewritten["stats"]["runs"].values())


@pytest.mark.parametrize("driver", ["not a driver", [1, 2], None])
def test_a_corrupt_driver_record_never_hides_a_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], driver: object
) -> None:
    """A run put with its driver gone whose record in ``drivers`` is not one (or was
    dropped: then it is shown from the cache, as an ended run) is read afresh."""
    root, ids = _root(tmp_path)
    fresh_list, fresh_stats = _listed(capsys), aggregate(collect(root))
    parts = cache_parts(root)
    for part in parts.values():
        assert set(part["drivers"]) == {ids[2]}
        part["drivers"][ids[2]] = driver
    write_cache_parts(root, parts)
    assert _listed(capsys) == fresh_list
    assert aggregate(collect(root)) == fresh_stats


def test_an_entry_whose_run_changed_after_it_was_put_is_stale(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run whose driver was gone and that ended meanwhile (its log and state.json
    written by a driver that came back) is shown ended, not gone."""
    root, ids = _root(tmp_path)
    gone = ids[2]
    assert "driver gone" in next(line for line in _listed(capsys).splitlines() if gone in line)
    state_path = root / gone / "state.json"
    state = json.loads(state_path.read_text())
    state.update(terminated=True, terminationReason="max_iterations", status="stopped")
    state_path.write_text(json.dumps(state))
    with (root / gone / "events.jsonl").open("a") as log:
        log.write(json.dumps({"type": "abort", "ts": now_ms(), "runId": gone, "reason": "x"}))
        log.write("\n")
    line = next(line for line in _listed(capsys).splitlines() if gone in line)
    assert "driver gone" not in line and "max_iterations" in line
    assert aggregate(collect(root))["byOutcome"]["abort:x"] == 1


def test_odd_run_ids_in_the_index_are_listed_missing_without_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root, _ = _root(tmp_path)
    for odd in ("/etc", "../outside-1796000000000", "nul\x00byte-1796000000000"):
        append_index_row(root, {"type": "armed", "ts": now_ms(), "runId": odd})
    (tmp_path / "outside-1796000000000").mkdir()
    shown = _listed(capsys)
    assert "/etc" in shown and "nul\\x00byte" in shown
    assert [line.endswith("missing") for line in shown.splitlines()[1:4]] == [True] * 3
    assert aggregate(collect(root))["byOutcome"]["missing"] == 3
    _listed(capsys)  # and again, from the cache


def test_a_secret_or_a_control_in_a_run_id_is_redacted_and_escaped_the_rest_shown_as_it_is(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root, ids = _root(tmp_path)
    token = "ghp_" + "A1b2C3d4" * 5
    append_index_row(root, {"type": "armed", "ts": now_ms(), "runId": f"{token}-1796000000000"})
    append_index_row(root, {"type": "armed", "ts": now_ms(), "runId": "bell\x07-1796000000001"})
    shown = _listed(capsys)
    assert token not in shown and "ghp_[REDACTED]-1796000000000" in shown
    assert "\x07" not in shown and "bell\\x07-1796000000001" in shown
    assert all(run_id in shown for run_id in ids)


def _live(root: Path, project: Path, label: str, **fields: object) -> str:
    state = {**alive_driver(), "status": "running", "cwd": str(project), **fields}
    return make_run(root, label, now_ms(), iterations=2, state=state, age_files=False)


def test_a_live_run_is_listed_from_plain_json_as_the_typed_reader_lists_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "runs"
    project, held = tmp_path / "project", tmp_path / "held"
    for folder in (project, held):
        folder.mkdir()
    off_path(held).parent.mkdir()
    off_path(held).write_text("")
    worktree = {"path": str(project), "branch": "ap/x", "base": "main", "origin": str(project)}
    plain = [
        _live(root, project, "plain"),
        _live(root, project, "planning", status="planning"),
        _live(root, project, "worktree", worktree=worktree),
    ]
    plain += [
        _live(root, project, "stopping", stopRequested=True),
        _live(root, project, "pausing", paused=True),
        _live(root, project, "gated", gate="which database?"),
        _live(root, held, "held"),
        _live(root, project, "stop-now", stopRequested=True, stopNow=True),
        _live(root, project, "paused", status="paused", paused=True, hold="tasks.jsonl line 3"),
        _live(root, project, "waiting", status="rate_limited", waitingUntil=now_ms() + 60_000),
    ]
    _live(root, project, "elsewhere", host="another-host")
    _live(root, project, "hook", mode="hook")
    _live(root, project, "unknown", status="exploded")
    _live(root, project, "dead", pid=999_999_999)
    read_plain: list[str] = []
    running_row = list_body._running_row

    def spy(folder: Path, now: int) -> object:
        row = running_row(folder, now)
        if row is not None:
            read_plain.append(folder.name)
        return row

    monkeypatch.setattr(list_body, "_running_row", spy)
    light_text, light_json = _listed(capsys), _listed(capsys, as_json=True)
    assert sorted(read_plain) == sorted(plain * 2)
    monkeypatch.setattr(list_body, "_running_row", lambda folder, now: None)
    assert _listed(capsys) == light_text
    assert _listed(capsys, as_json=True) == light_json
    assert "(stop requested)" in light_text and "(pause requested)" in light_text
    assert "held by" in light_text and "branch ap/x" in light_text


@pytest.mark.parametrize(
    "fields",
    [
        {"iter": -5},
        {"iter": 10**25},
        {"iter": 3.7},
        {"totalPausedMs": "soon"},
        {"spend": {"costUsd": "12"}},
    ],
)
def test_a_live_run_the_typed_reader_refuses_is_listed_as_the_typed_way_lists_it(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    fields: dict[str, object],
) -> None:
    # ``status`` calls such a state.json corrupt; ``list`` must not call it running.
    root = tmp_path / "runs"
    project = tmp_path / "project"
    project.mkdir()
    _live(root, project, "odd", **fields)
    light = _listed(capsys)
    assert "missing" in light and "running" not in light
    monkeypatch.setattr(list_body, "_running_row", lambda folder, now: None)
    assert _listed(capsys) == light


@pytest.mark.parametrize(
    ("field", "value"),
    [
        (3, ["a", "list"]),
        (4, {"an": "object"}),
        (6, True),
        (7, "many"),
        (9, "0.5"),
        (5, None),
        (9, 0),  # a fresh cost is a float: an int would change stats --json
        (9, float("inf")),  # 1e400 in the file: json decodes it so
    ],
)
def test_a_cached_summary_of_the_wrong_types_is_read_afresh_not_a_crash(
    tmp_path: Path, field: int, value: object
) -> None:
    root, ids = _root(tmp_path)
    fresh = aggregate(collect(root))
    parts = cache_parts(root)
    parts["stats"]["runs"][ids[0]][0][field] = value
    write_cache_parts(root, parts)
    assert aggregate(collect(root)) == fresh
    assert cache_parts(root) != parts


def test_each_line_is_made_of_its_own_row_whatever_the_other_rows_hold(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``list`` fills its lines a column at a time: a start that is not an int (or
    missing), a limit, a run never read (``?`` iterations) or a worktree's branch in
    one row changes that row's line alone, which reads as one made by itself."""
    root = tmp_path / "runs"
    start = now_ms() - 10_000_000
    worktree = {"path": str(tmp_path), "branch": "ap/x", "base": "main", "origin": str(tmp_path)}
    for number in range(7):
        state = {"worktree": worktree} if number == 5 else None
        make_run(root, "api", start + number * 60_000, terminal=("complete", "done"), state=state)
    make_run(root, "gone", start + 7 * 60_000, folder=False)
    index = root / "index.jsonl"
    rows = [json.loads(line) for line in index.read_text().splitlines()]
    rows[0]["startedAt"] = rows[0].pop("ts")  # the seed's writer: no ts
    rows[1]["ts"] = True
    rows[2]["ts"] = "yesterday"
    rows[3]["maxIterations"] = None
    rows[4]["maxIterations"] = 0
    index.write_text("".join(json.dumps(row) + "\n" for row in rows))
    for _ in range(2):  # read afresh, then from finished.json
        header, *lines = _listed(capsys).splitlines()
        assert header.startswith("started")
        for row, line in zip(reversed(rows), lines, strict=True):
            at = row.get("ts") if isinstance(row.get("ts"), int) else row.get("startedAt")
            minute = time.localtime(at // 60_000 * 60) if isinstance(at, int) else None
            when = "????-??-?? ??:??" if minute is None else time.strftime("%Y-%m-%d %H:%M", minute)
            done = "?" if row["label"] == "gone" else "1"
            most = str(row.get("maxIterations") or "∞")
            assert line.startswith(f"{when}  {row['runId']:<40} iter {done}/{most:<4} "), line
            assert line.endswith("  (worktree, branch ap/x)") == (row is rows[5])


@pytest.mark.parametrize(
    "damage",
    [
        lambda index: index.__setitem__(1, [["x"], [1], "not a column"]),
        lambda index: index[1][0].__setitem__(0, ""),
        lambda index: index[1][0].__setitem__(0, 7),
        lambda index: index[1][1].__setitem__(0, True),
        lambda index: index[1][2].pop(),
        lambda index: index.__setitem__(1, {"rows": []}),
        lambda index: index.__setitem__(0, "not a key"),
    ],
)
def test_the_index_kept_for_list_is_read_again_once_it_changed_or_is_not_whole(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], damage: object
) -> None:
    """``list`` keeps its columns of ``index.jsonl`` in ``finished.json`` and decodes
    the index again only when it changed (a run started, a row edited by hand) or
    what is kept is not of their shape: never a row the index no longer holds."""
    root, ids = _root(tmp_path)
    first = _listed(capsys)
    kept = cache_parts(root)["list"]["index"]
    assert kept[1][0] == ids
    new = make_run(root, "late", now_ms() - 5_000_000, terminal=("complete", "done"))
    listed = _listed(capsys)
    assert new in listed and listed.endswith(first.split("\n", 1)[1])
    index = root / "index.jsonl"
    index.write_text(index.read_text().replace('"maxIterations":10', '"maxIterations":7'))
    assert "iter 3/7 " in _listed(capsys)
    parts = cache_parts(root)
    damage(parts["list"]["index"])  # type: ignore[operator]
    write_cache_parts(root, parts)
    assert _listed(capsys) == listed.replace("/10 ", "/7  ")
    rebuilt = cache_parts(root)["list"]["index"]
    assert rebuilt[1][0] == [*ids, new] and rebuilt[1][2] == ["7"] * 4


@pytest.mark.parametrize(
    "damage",
    [
        lambda index: index[1][0].__setitem__(1, index[1][0][0]),  # a run id twice
        lambda index: index[1][1].pop(),
        lambda index: index[1].append([]),
        lambda index: index[1][3].__setitem__(0, "well formed"),
        lambda index: index.__setitem__(1, "not columns"),
    ],
)
def test_the_index_kept_for_stats_is_read_again_once_it_changed_or_is_not_whole(
    tmp_path: Path, damage: object
) -> None:
    """``stats`` keeps its columns of ``index.jsonl`` (run ids, labels, agents) as
    ``list`` does: a run started or a label edited in the index counts at once, and
    columns not of their shape are made again from the index."""
    root, _ = _root(tmp_path)
    before = aggregate(collect(root))
    make_run(root, "late", now_ms() - 5_000_000, terminal=("complete", "done"))
    assert aggregate(collect(root))["runs"] == before["runs"] + 1
    index = root / "index.jsonl"
    index.write_text(index.read_text().replace('"label":"api"', '"label":"web"'))
    counted = aggregate(collect(root))
    assert counted["byLabel"] == {"web": 2, "docs": 1, "late": 1}
    parts = cache_parts(root)
    damage(parts["stats"]["index"])  # type: ignore[operator]
    write_cache_parts(root, parts)
    assert aggregate(collect(root)) == counted
    assert aggregate(collect(root)) == counted


def _no_run_read(monkeypatch: pytest.MonkeyPatch) -> None:
    """Reading any run's files afresh fails the test."""
    from autopilot.view import stats

    def refuse(*_: object) -> None:
        raise AssertionError("a run was read afresh")

    monkeypatch.setattr(stats, "_summarize", refuse)
    monkeypatch.setattr(list_body, "_fresh_row", refuse)


def test_unchanged_runs_are_answered_from_the_columns_without_an_entry_each(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every run kept and unchanged: one comparison of all keys, the values taken from
    the columns at once; no run read afresh, no entry made one by one."""
    from autopilot.store.finished import FinishedRuns

    root, ids = _root(tmp_path)
    fresh_list, fresh_stats = _listed(capsys), aggregate(collect(root))
    made: list[str] = []
    original = FinishedRuns._runs.fget  # type: ignore[attr-defined]

    def counted(self: FinishedRuns) -> object:
        made.append(self.part)
        return original(self)

    with monkeypatch.context() as patch:
        _no_run_read(patch)
        patch.setattr(FinishedRuns, "_runs", property(counted))
        assert _listed(capsys) == fresh_list
        assert aggregate(collect(root)) == fresh_stats
    assert made == []
    # One run's log grows: that run alone is read afresh, the cache rewritten in the
    # index's order, and then answered from the columns again.
    with (root / ids[1] / "events.jsonl").open("a") as log:
        log.write(json.dumps({"type": "note", "ts": now_ms(), "runId": ids[1]}) + "\n")
    assert aggregate(collect(root)) == fresh_stats
    assert cache_parts(root)["stats"]["ids"] == ids
    with monkeypatch.context() as patch:
        _no_run_read(patch)
        assert aggregate(collect(root)) == fresh_stats


@pytest.mark.parametrize(
    "damage",
    [
        lambda part: part["columns"][0].pop(),
        lambda part: part["keys"].__setitem__(0, "7"),
        lambda part: part["keys"].pop(),
        lambda part: part["ids"].__setitem__(1, part["ids"][0]),
        lambda part: part.__setitem__("columns", "not columns"),
        lambda part: part.pop("ids"),
        lambda part: part.update(ids=[], keys=[], columns=[[1]]),
        lambda part: part["keys"].__setitem__(slice(0, 4), [-2, -2, -2, -2]),
    ],
)
def test_columns_of_the_wrong_shape_are_a_corrupt_part_read_afresh(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], damage: object
) -> None:
    from autopilot.store.finished import FinishedRuns

    root, ids = _root(tmp_path)
    fresh_list, fresh_stats = _listed(capsys), aggregate(collect(root))
    lines = (root / FINISHED_FILE).read_text().splitlines()
    parts = [json.loads(line) for line in lines]
    for part in parts:
        damage(part)  # type: ignore[operator]
    (root / FINISHED_FILE).write_text("".join(json.dumps(part) + "\n" for part in parts))
    assert FinishedRuns(root, "stats")._runs == {}
    assert _listed(capsys) == fresh_list
    assert aggregate(collect(root)) == fresh_stats
    assert all(set(part["runs"]) == set(ids) for part in cache_parts(root).values())


@pytest.mark.parametrize(
    ("field", "value"),
    [
        (2, 3.0),
        (2, True),
        (3, 7),
        (0, 1),
        (1, ["a", "list"]),
        (4, {"branch": "not a worktree record"}),
        (4, "a string"),
    ],
)
def test_a_kept_list_row_of_the_wrong_types_is_read_afresh_not_shown(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], field: int, value: object
) -> None:
    root, ids = _root(tmp_path)
    fresh_list, fresh_json = _listed(capsys), _listed(capsys, as_json=True)
    parts = cache_parts(root)
    parts["list"]["runs"][ids[0]][0][field] = value
    write_cache_parts(root, parts)
    assert _listed(capsys, as_json=True) == fresh_json
    write_cache_parts(root, parts)
    assert _listed(capsys) == fresh_list


def test_a_run_listed_twice_in_the_index_is_kept_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    root, ids = _root(tmp_path)
    index = root / "index.jsonl"
    first = index.read_text().splitlines()[0]
    with index.open("a") as stream:
        stream.write(first + "\n")
    fresh_list = _listed(capsys)
    assert sorted(cache_parts(root)["list"]["ids"]) == sorted(set(ids))
    with monkeypatch.context() as patch:
        _no_run_read(patch)
        assert _listed(capsys) == fresh_list


def test_a_cache_that_is_not_a_regular_file_is_no_cache(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A FIFO is neither waited on nor read; the runs are read afresh."""
    import os

    root, _ = _root(tmp_path)
    fresh_list, fresh_stats = _listed(capsys), aggregate(collect(root))
    (root / FINISHED_FILE).unlink()
    os.mkfifo(root / FINISHED_FILE)
    assert aggregate(collect(root)) == fresh_stats
    assert _listed(capsys) == fresh_list


@pytest.mark.parametrize("value", [True, 1.0])
def test_a_label_edited_to_an_equal_value_of_another_type_is_read_afresh(
    tmp_path: Path, value: object
) -> None:
    """``1``, ``1.0`` and ``true`` are equal in Python but shown differently."""
    root, _ = _root(tmp_path)
    index = root / "index.jsonl"
    rows = [json.loads(line) for line in index.read_text().splitlines()]
    rows[0]["label"] = 1
    index.write_text("".join(json.dumps(row) + "\n" for row in rows))
    aggregate(collect(root))  # kept with the label 1
    rows[0]["label"] = value
    index.write_text("".join(json.dumps(row) + "\n" for row in rows))
    totals = aggregate(collect(root))
    (root / FINISHED_FILE).unlink()
    assert totals == aggregate(collect(root))
    assert str(value) in totals["byLabel"]


def test_a_driver_record_no_process_can_have_never_crashes_list_or_stats(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root, ids = _root(tmp_path)
    fresh_list, fresh_stats = _listed(capsys), aggregate(collect(root))
    parts = cache_parts(root)
    for part in parts.values():
        part["drivers"][ids[2]][0] = 10**30
    write_cache_parts(root, parts)
    assert aggregate(collect(root)) == fresh_stats
    assert _listed(capsys) == fresh_list
