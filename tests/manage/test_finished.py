"""``list`` and ``stats`` keep ended runs in ``finished.json``: the same answers as a
fresh read, and never an answer the run's files no longer give."""

from __future__ import annotations

import fcntl
import json
import shutil
import stat
from pathlib import Path

import pytest

from autopilot.store.finished import FINISHED_FILE
from autopilot.view.stats import aggregate, collect
from tests.conftest import run_cli
from tests.manage.runs import alive_driver, cache_parts, dead_driver, make_run, now_ms


def _root(tmp_path: Path) -> tuple[Path, list[str]]:
    root = tmp_path / "runs"
    start = now_ms() - 10_000_000
    ids = [
        make_run(root, "docs", start, terminal=("complete", "completion_promise"), iterations=3),
        make_run(root, "api", start + 1, terminal=("abort", "max_iterations"), iterations=10),
        make_run(root, "api", start + 2, iterations=2, state=alive_driver()),
        make_run(root, "api", start + 3, iterations=1, state=dead_driver()),
    ]
    return root, ids


def _list(tmp_path: Path, *args: str) -> str:
    done = run_cli(["list", *args], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_answers_from_the_cache_are_those_of_a_fresh_read(tmp_path: Path) -> None:
    root, ids = _root(tmp_path)
    fresh_stats = aggregate(collect(root))
    fresh_list, fresh_json = _list(tmp_path), _list(tmp_path, "--json")
    cache = root / FINISHED_FILE
    assert cache.exists()
    assert stat.S_IMODE(cache.stat().st_mode) == 0o600
    # The two ended runs and the one whose driver is gone, not the one running.
    parts = cache_parts(root)
    assert set(parts) == {"list", "stats"}
    assert all(set(part["runs"]) == {ids[0], ids[1], ids[3]} for part in parts.values())
    assert aggregate(collect(root)) == fresh_stats
    assert _list(tmp_path) == fresh_list
    assert _list(tmp_path, "--json") == fresh_json
    assert "completed (completion_promise)" in fresh_list


def test_a_run_whose_files_changed_is_read_afresh(tmp_path: Path) -> None:
    root, ids = _root(tmp_path)
    aggregate(collect(root))
    _list(tmp_path)
    state_path = root / ids[0] / "state.json"
    state = json.loads(state_path.read_text())
    state.update(iter=7, terminationReason="max_iterations", completed=False)
    state_path.write_text(json.dumps(state))
    with (root / ids[0] / "events.jsonl").open("a") as log:
        log.write(json.dumps({"type": "abort", "ts": now_ms(), "runId": ids[0]}) + "\n")
    totals = aggregate(collect(root))
    assert totals["byOutcome"].get("complete:completion_promise") is None
    assert totals["byOutcome"]["abort"] == 1
    row = next(
        json.loads(line)
        for line in _list(tmp_path, "--json").splitlines()
        if json.loads(line)["runId"] == ids[0]
    )
    assert row["iterations"] == 7 and row["reason"] == "max_iterations"


def test_a_removed_run_is_missing_and_leaves_the_cache(tmp_path: Path) -> None:
    root, ids = _root(tmp_path)
    aggregate(collect(root))
    _list(tmp_path)
    shutil.rmtree(root / ids[1])
    assert aggregate(collect(root))["byOutcome"]["missing"] == 1
    assert ids[1] not in cache_parts(root)["stats"]["runs"]
    line = next(line for line in _list(tmp_path).splitlines() if ids[1] in line)
    assert line.endswith("missing")


def test_a_corrupt_cache_is_ignored_and_rewritten(tmp_path: Path) -> None:
    root, _ = _root(tmp_path)
    fresh = aggregate(collect(root))
    (root / FINISHED_FILE).write_text('{"version": 3, "runs": {"x": [')
    assert aggregate(collect(root)) == fresh
    assert cache_parts(root)["stats"]["version"] == 5


def test_a_run_whose_driver_was_gone_is_read_afresh_once_a_driver_holds_it(
    tmp_path: Path,
) -> None:
    root, ids = _root(tmp_path)
    gone = ids[3]
    assert aggregate(collect(root))["byOutcome"]["interrupted"] == 1
    assert "driver gone" in next(line for line in _list(tmp_path).splitlines() if gone in line)
    parts = cache_parts(root)
    assert {"list", "stats"} == set(parts)
    assert all(part["drivers"][gone][0] == 999_999_999 for part in parts.values())
    # A driver started again holds driver.lock before it writes state.json.
    with (root / gone / "driver.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        totals = aggregate(collect(root))
        line = next(line for line in _list(tmp_path).splitlines() if gone in line)
    assert "interrupted" not in totals["byOutcome"]
    assert totals["byOutcome"]["active"] == 2
    assert "driver gone" not in line and "running" in line


def test_each_command_reads_and_rewrites_its_own_line_of_the_cache(tmp_path: Path) -> None:
    """``list`` and ``stats`` each keep one line of ``finished.json``: rewriting its own,
    a command keeps the other's as it was, and a line holding a NaN (not JSON) is
    corrupt to its command alone."""
    from autopilot.store import finished

    root, ids = _root(tmp_path)
    fresh_stats, fresh_list = aggregate(collect(root)), _list(tmp_path)
    list_line, stats_line = (root / FINISHED_FILE).read_bytes().splitlines()  # its own first
    assert stats_line.startswith(b'{"version":5,"part":"stats",')
    assert list_line.startswith(b'{"version":5,"part":"list",')
    (root / FINISHED_FILE).write_bytes(stats_line + b"\n")
    assert _list(tmp_path) == fresh_list
    assert (root / FINISHED_FILE).read_bytes() == list_line + b"\n" + stats_line + b"\n"
    nan = stats_line.replace(b'"part":"stats",', b'"part":"stats","x":NaN,')
    (root / FINISHED_FILE).write_bytes(list_line + b"\n" + nan + b"\n")
    assert finished.FinishedRuns(root, "stats")._runs == {}
    assert set(finished.FinishedRuns(root, "list")._runs) == {ids[0], ids[1], ids[3]}
    assert aggregate(collect(root)) == fresh_stats
    assert (root / FINISHED_FILE).read_bytes() == stats_line + b"\n" + list_line + b"\n"


def test_a_long_index_is_read_as_a_short_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``read_index`` decodes a long index in one pass and a short one a line at a
    time: the same rows, a NaN or a huge integer decided by ``json`` either way."""
    from autopilot.store import index

    root, _ = _root(tmp_path)
    with (root / index.INDEX_FILE).open("ab") as rows:
        rows.write(b'{"type":"armed","ts":NaN,"runId":"nan-1"}\n')
        rows.write(b'{"type":"armed","ts":' + b"9" * 400 + b',"runId":"big-1"}\n')
        rows.write(b"not json\n")
    short = list(index.read_index(root))
    assert [r["runId"] for r in short][-2:] == ["nan-1", "big-1"]
    monkeypatch.setattr(index, "PLAIN_INDEX_BYTES", 0)
    assert list(index.read_index(root)) == short


def test_a_log_edited_by_hand_is_read_afresh(tmp_path: Path) -> None:
    """The cache is keyed by the log's inode, size and mtime: a hand edit of an ended
    run's events.jsonl (its terminal event's reason changed) is seen at once."""
    root, ids = _root(tmp_path)
    assert aggregate(collect(root))["byOutcome"]["abort:max_iterations"] == 1
    log = root / ids[1] / "events.jsonl"
    log.write_text(log.read_text().replace('"max_iterations"', '"stagnation"'))
    totals = aggregate(collect(root))
    assert "abort:max_iterations" not in totals["byOutcome"]
    assert totals["byOutcome"]["abort:stagnation"] == 1


@pytest.mark.parametrize(
    "odd",
    [
        b"",  # every line one object: decoded in one call
        b'{"type":"armed","runId":"two-1"} {"type":"armed","runId":"two-2"}\n',
        b'{"type":"armed",\n"runId":"split-1"}\n1 2\n',  # one value on two lines, two on one
    ],
)
def test_a_long_index_decoded_at_once_gives_the_rows_of_one_line_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, odd: bytes
) -> None:
    """A long index is decoded in one pass only where each line is exactly one value;
    a line holding two values, or a value over two lines, is decided line by line, as
    ``json`` decides a short index."""
    from autopilot.store import index

    root, ids = _root(tmp_path)
    with (root / index.INDEX_FILE).open("ab") as rows:
        rows.write(odd)
    short = list(index.read_index(root))
    assert [r["runId"] for r in short] == ids
    monkeypatch.setattr(index, "PLAIN_INDEX_BYTES", 0)
    assert list(index.read_index(root)) == short


def test_a_worktree_runs_branch_is_listed_fresh_and_from_the_cache(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    record = {"path": "/w/x", "branch": "autopilot/x-1", "base": "abc", "origin": "main"}
    run_id = make_run(
        root,
        "x",
        now_ms() - 10_000,
        terminal=("complete", "completion_promise"),
        iterations=2,
        state={"worktree": record},
    )
    fresh = next(line for line in _list(tmp_path).splitlines() if run_id in line)
    assert fresh.endswith("completed (completion_promise)  (worktree, branch autopilot/x-1)")
    assert run_id in cache_parts(root)["list"]["runs"]
    assert next(line for line in _list(tmp_path).splitlines() if run_id in line) == fresh
    row = json.loads(_list(tmp_path, "--json").splitlines()[0])
    assert row["worktree"] == record and row["iterations"] == 2
