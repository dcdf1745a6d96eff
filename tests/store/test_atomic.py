"""Whole-file writes: the new content or the old, the mode asked for, no temp left."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from autopilot.store import atomic
from autopilot.store.atomic import write_atomically, write_json_atomically


def test_a_write_replaces_the_file_with_the_mode_asked_for(tmp_path: Path) -> None:
    path = tmp_path / "tasks.jsonl"
    path.write_text("old\n")
    write_atomically(path, b"new\n", mode=0o644)
    assert path.read_bytes() == b"new\n"
    assert path.stat().st_mode & 0o777 == 0o644
    assert [p.name for p in tmp_path.iterdir()] == ["tasks.jsonl"]


def test_json_is_written_indented_and_private_by_default(tmp_path: Path) -> None:
    path = tmp_path / "approved-run.json"
    write_json_atomically(path, {"status": "running", "note": "é"})
    assert path.read_text(encoding="utf-8") == '{\n  "status": "running",\n  "note": "é"\n}\n'
    assert json.loads(path.read_text(encoding="utf-8"))["note"] == "é"
    assert path.stat().st_mode & 0o777 == 0o600


def test_a_failed_write_leaves_what_was_there_and_no_temp(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    path.mkdir()  # the rename onto it fails
    (path / "kept").write_text("old")
    with pytest.raises(OSError):
        write_atomically(path, b"new")
    assert (path / "kept").read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["state.json"]


@pytest.mark.parametrize("thread", [True, False], ids=["on-a-thread", "no-thread-to-be-had"])
def test_a_folder_fsync_started_soon_is_done_once_waited_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, thread: bool
) -> None:
    synced: list[int] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        synced.append(fd)
        real_fsync(fd)

    monkeypatch.setattr(atomic.os, "fsync", fsync)
    if not thread:

        def refuse(*_: object) -> None:
            raise RuntimeError("can't start new thread")

        monkeypatch.setattr(atomic._thread, "start_new_thread", refuse)
        monkeypatch.setattr(atomic, "_writer", atomic._Writer())  # no writer thread yet
    wait = atomic.fsync_folder_soon(tmp_path)
    wait()
    assert len(synced) == 1
    wait()  # waiting again returns at once


def test_calls_started_soon_run_in_order_and_one_that_fails_stops_none_after_it() -> None:
    done: list[int] = []
    release = atomic._thread.allocate_lock()
    release.acquire()

    def first() -> None:
        with release:  # the writer is busy: the calls after this one queue up
            done.append(1)

    def failing() -> None:
        raise OSError("disk gone")

    def leaving() -> None:
        raise SystemExit(1)

    waits = [atomic.soon(first), atomic.soon(failing), atomic.soon(leaving)]
    waits += [atomic.soon(lambda n=n: done.append(n)) for n in range(2, 6)]
    assert done == []
    release.release()
    for wait in waits:
        wait()
    assert done == [1, 2, 3, 4, 5]


def test_a_forked_child_gets_a_writer_of_its_own() -> None:
    atomic.soon(lambda: None)()  # this process has its writer
    child = os.fork()
    if child == 0:  # the writer thread did not come along: a new one runs the call
        ran: list[bool] = []
        atomic.soon(lambda: ran.append(True))()
        os._exit(0 if ran == [True] else 1)
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0
