"""Following a run folder: the changes the kernel reports, quiet periods, stopping."""

from __future__ import annotations

import os
import queue
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from autopilot.view import follow
from autopilot.view.follow import StopEvent, watch_run_dir
from autopilot.view.inotify import RunDirNotify, Unavailable

WAIT = 10.0
"""A guard against a hang, never a measure: every report comes far sooner."""

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify")


class Watching:
    """``watch_run_dir`` in a thread, its reports in a queue."""

    def __init__(self, folder: Path, *, quiet_seconds: float = 3600.0) -> None:
        self.stop = StopEvent()
        self.reports: queue.Queue[frozenset[str]] = queue.Queue()
        changes = watch_run_dir(folder, self.stop, quiet_seconds=quiet_seconds)
        self._thread = threading.Thread(target=self._run, args=(changes,))
        self._thread.start()

    def _run(self, changes: Iterator[frozenset[str]]) -> None:
        for names in changes:
            self.reports.put(names)

    def next(self) -> frozenset[str]:
        return self.reports.get(timeout=WAIT)

    def close(self) -> bool:
        """Stop; True if the thread ended."""
        self.stop.set()
        self._thread.join(WAIT)
        return not self._thread.is_alive()


@pytest.fixture
def run_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "events.jsonl").write_text("")
    return folder


@pytest.fixture
def watching(run_folder: Path) -> Iterator[Watching]:
    watch = Watching(run_folder)
    yield watch
    assert watch.close()


def _append(path: Path, text: str) -> None:
    with path.open("a") as handle:
        handle.write(text)


@linux_only
def test_reports_appends_replacements_and_new_iteration_output(
    run_folder: Path, watching: Watching
) -> None:
    """Watched from the moment ``watch_run_dir`` returns, subfolders made later too."""
    _append(run_folder / "events.jsonl", "{}\n")
    assert watching.next() == {"events.jsonl"}
    (run_folder / "state.json.tmp").write_text("{}")
    os.replace(run_folder / "state.json.tmp", run_folder / "state.json")
    assert watching.next() == {"state.json"}
    attempt = run_folder / "iter-0001"
    attempt.mkdir()
    (attempt / "stderr.log").write_text("not watched")
    (attempt / "stdout.log").write_text("hello")
    assert watching.next() == {"stdout.log"}
    _append(attempt / "stdout.log", " again")
    assert watching.next() == {"stdout.log"}


@linux_only
def test_other_files_are_not_reported(run_folder: Path, watching: Watching) -> None:
    (run_folder / "driver.lock").write_text("1")
    (run_folder / "iter-0002").mkdir()
    (run_folder / "iter-0002" / "prompt.md").write_text("do it")
    _append(run_folder / "events.jsonl", "{}\n")
    assert watching.next() == {"events.jsonl"}


def test_a_quiet_period_yields_an_empty_set(run_folder: Path) -> None:
    watch = Watching(run_folder, quiet_seconds=0.05)
    try:
        assert watch.next() == frozenset()
    finally:
        assert watch.close()


def test_stop_ends_a_quiet_wait(run_folder: Path) -> None:
    """A ``StopEvent`` wakes the waiting thread: no quiet period has to pass first."""
    watch = Watching(run_folder, quiet_seconds=3600)
    assert watch.close()
    assert watch.reports.empty()


def test_a_plain_event_stops_it_too(run_folder: Path) -> None:
    stop = threading.Event()
    stop.set()
    assert list(watch_run_dir(run_folder, stop, quiet_seconds=3600)) == []


def test_a_missing_folder_cannot_be_watched(tmp_path: Path) -> None:
    with pytest.raises(OSError):
        next(watch_run_dir(tmp_path / "absent", StopEvent()))


@linux_only
def test_wake_ends_a_wait_and_close_is_final(run_folder: Path) -> None:
    notify = RunDirNotify(run_folder, frozenset({"events.jsonl"}))
    notify.wake()
    assert notify.wait(3600) is False
    _append(run_folder / "events.jsonl", "{}\n")
    assert notify.wait(WAIT) is True
    assert notify.read() == {"events.jsonl"}
    notify.close()
    notify.close()
    notify.wake()  # after close: nothing to wake, no error


def test_stop_event_calls_its_wakers() -> None:
    stop = StopEvent()
    woken: list[str] = []
    stop.add_waker(lambda: woken.append("first"))
    stop.set()
    stop.add_waker(lambda: woken.append("late"))
    assert stop.is_set() and woken == ["first", "late"]


def test_without_inotify_watchfiles_reports_the_same(
    run_folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def unavailable(*_: object) -> RunDirNotify:
        raise Unavailable(28, "no space left for watches")

    monkeypatch.setattr(follow, "RunDirNotify", unavailable)
    watch = Watching(run_folder)
    try:
        # watchfiles starts watching inside its first step: write until it reports.
        while True:
            _append(run_folder / "events.jsonl", "{}\n")
            try:
                if "events.jsonl" in watch.reports.get(timeout=0.5):
                    break
            except queue.Empty:
                continue
    finally:
        assert watch.close()
