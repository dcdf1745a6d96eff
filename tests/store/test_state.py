"""``state.json``: locked read-modify-write with real processes (``docs/formats.md``)."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from autopilot.core.vocabulary import TERMINAL_STATUSES, RunStatus
from autopilot.errors import EnvironmentProblem, StateFileError
from autopilot.store.run_state import RunState, decode_state
from autopilot.store.state import (
    StateStore,
    encode_state,
    read_state,
    read_state_quietly,
    write_atomically,
)

INITIAL_JSON = {
    "runId": "demo-1700000000000",
    "mode": "prompt",
    "max": 10,
    "min": 1,
    "iter": 0,
    "paused": False,
    "stopRequested": False,
    "terminated": False,
    "terminationReason": None,
    "label": "démo",
}
INITIAL = decode_state(INITIAL_JSON)


def _json(state: RunState, **changes: Any) -> dict[str, Any]:
    return {**state.to_json(), **changes}


@pytest.fixture
def store(tmp_path: Path) -> StateStore:
    store = StateStore(tmp_path / "state.json")
    store.create(INITIAL)
    return store


def test_create_writes_version_1_in_the_seed_layout(tmp_path: Path) -> None:
    store = StateStore(tmp_path / "state.json")
    written = store.create(INITIAL)
    assert written.to_json() == _json(INITIAL, version=1)
    text = (tmp_path / "state.json").read_text(encoding="utf-8")
    assert text == json.dumps(_json(INITIAL, version=1), indent=2, ensure_ascii=False) + "\n"
    assert text.startswith('{\n  "runId": "demo-1700000000000",\n')
    assert '"label": "démo"' in text
    assert store.read() == written


def test_create_refuses_an_existing_file(store: StateStore) -> None:
    with pytest.raises(StateFileError, match="already exists"):
        store.create(RunState(run_id="other"))
    assert store.read().run_id == INITIAL.run_id


def test_update_applies_the_change_and_bumps_the_version(store: StateStore) -> None:
    def pause(state: RunState) -> None:
        state.paused = True
        state.paused_at_ms = 1234

    written = store.update(pause)
    assert written.to_json() == _json(INITIAL, paused=True, pausedAt=1234, version=2)
    assert store.read() == written
    written = store.update(lambda state: setattr(state, "paused", False))
    assert (written.version, written.paused) == (3, False)
    assert store.read() == written
    text = store.path.read_text(encoding="utf-8")
    assert text == json.dumps(written.to_json(), indent=2, ensure_ascii=False) + "\n"


def test_update_sees_writes_from_another_store_object(store: StateStore) -> None:
    other = StateStore(store.path)
    other.update(lambda state: setattr(state, "stop_requested", True))
    written = store.update(lambda state: setattr(state, "iteration", 1))
    assert written.to_json() == _json(INITIAL, stopRequested=True, iter=1, version=3)


def test_update_leaves_no_temp_files(store: StateStore) -> None:
    for i in range(5):
        store.update(lambda state, i=i: setattr(state, "iteration", i))
    assert sorted(p.name for p in store.path.parent.iterdir()) == ["state.json", "state.json.lock"]


def test_a_change_that_raises_writes_nothing(store: StateStore) -> None:
    def broken(state: RunState) -> None:
        state.paused = True
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        store.update(broken)
    assert store.read().to_json() == _json(INITIAL, version=1)
    # The lock was released: the next update goes through.
    assert store.update(lambda state: None).version == 2


def test_a_state_json_cannot_hold_nan(store: StateStore) -> None:
    with pytest.raises(StateFileError, match="cannot write"):
        store.update(lambda state: state.extra.update(cost=float("nan")))
    assert store.read().to_json() == _json(INITIAL, version=1)


def test_update_of_a_missing_file_is_an_error(tmp_path: Path) -> None:
    store = StateStore(tmp_path / "state.json")
    with pytest.raises(StateFileError, match="does not exist"):
        store.update(lambda state: None)
    assert not store.path.exists()


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b"{",
        b"not json at all\n",
        b"[1, 2]\n",
        b"null",
        b'"text"',
        b"\xff\xfe\x00",
        b'{"a": NaN',
    ],
)
def test_a_corrupt_state_json_raises_a_one_line_state_file_error(
    store: StateStore, content: bytes
) -> None:
    store.path.write_bytes(content)
    for action in (store.read, lambda: store.update(lambda state: None)):
        with pytest.raises(StateFileError) as caught:
            action()
        message = str(caught.value)
        assert "\n" not in message
        assert str(store.path) in message
        assert isinstance(caught.value, EnvironmentProblem)
    assert store.path.read_bytes() == content
    assert read_state_quietly(store.path) is None


def test_update_with_a_fallback_keeps_the_corrupt_file_aside(store: StateStore) -> None:
    store.path.write_bytes(b'{"runId": "demo-17')
    fallback = decode_state({**INITIAL_JSON, "iter": 4, "version": 7})
    written = store.update(lambda state: setattr(state, "paused", True), fallback=fallback)
    assert written.to_json() == _json(fallback, paused=True, version=8)
    assert store.read() == written
    assert (store.path.parent / "state.json.corrupt-7").read_bytes() == b'{"runId": "demo-17'
    assert fallback.paused is False  # the caller's copy is left as it was


def test_update_with_a_fallback_uses_the_file_when_it_is_fine(store: StateStore) -> None:
    written = store.update(lambda state: None, fallback=RunState(run_id="other", version=50))
    assert written.to_json() == _json(INITIAL, version=2)
    assert not list(store.path.parent.glob("*.corrupt-*"))


def test_read_state_of_a_directory_is_a_state_file_error(tmp_path: Path) -> None:
    (tmp_path / "state.json").mkdir()
    with pytest.raises(StateFileError, match="cannot read"):
        read_state(tmp_path / "state.json")


def test_write_atomically_replaces_the_whole_file(tmp_path: Path) -> None:
    path = tmp_path / "f.json"
    path.write_bytes(b"x" * 10_000)
    write_atomically(path, b"short\n")
    assert path.read_bytes() == b"short\n"
    assert [p.name for p in tmp_path.iterdir()] == ["f.json"]


def test_a_write_that_leaves_the_folder_fsync_to_the_next_is_whole(tmp_path: Path) -> None:
    path = tmp_path / "f.json"
    path.write_bytes(b"x" * 10_000)
    write_atomically(path, b"short\n", sync_dir=False)
    assert path.read_bytes() == b"short\n"
    assert [p.name for p in tmp_path.iterdir()] == ["f.json"]


def test_write_atomically_cleans_up_when_the_rename_fails(tmp_path: Path) -> None:
    target = tmp_path / "f.json"
    target.mkdir()
    (target / "keep").write_bytes(b"old")
    with pytest.raises(OSError):
        write_atomically(target, b"new")
    assert (target / "keep").read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["f.json"]


def test_encode_state_is_two_space_indented_with_a_newline() -> None:
    assert (
        encode_state({"a": [1], "b": "é"}) == '{\n  "a": [\n    1\n  ],\n  "b": "é"\n}\n'.encode()
    )
    with pytest.raises(ValueError):
        encode_state({"a": float("inf")})


def test_terminal_statuses() -> None:
    assert frozenset({"completed", "stopped", "error"}) == TERMINAL_STATUSES
    assert RunStatus.RATE_LIMITED == "rate_limited"


# --- many processes -------------------------------------------------------------------------

_UPDATER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from autopilot.store.state import StateStore
    path, worker, count = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    go = path.with_name("go")
    while not go.exists():
        time.sleep(0.002)
    store = StateStore(path)
    for i in range(count):
        def change(state, i=i):
            # pause / resume / stop as two terminals would, plus a counter and a token.
            kind = (worker + i) % 3
            if kind == 0:
                state.paused = True
                state.paused_at_ms = i
            elif kind == 1:
                state.paused = False
                state.paused_at_ms = None
            else:
                state.stop_requested = True
                state.stop_reason = "worker %d" % worker
            # Fields this version does not know survive every update.
            state.extra["updates"] = state.extra.get("updates", 0) + 1
            state.extra.setdefault("tokens", []).append("%d:%d" % (worker, i))
        store.update(change)
    """
)


def test_concurrent_updates_from_many_processes_lose_nothing(store: StateStore) -> None:
    workers, per_worker = 20, 30
    procs = [
        subprocess.Popen([sys.executable, "-c", _UPDATER, str(store.path), str(w), str(per_worker)])
        for w in range(workers)
    ]
    (store.path.parent / "go").touch()
    for proc in procs:
        assert proc.wait(timeout=120) == 0
    state = store.read()
    total = workers * per_worker
    expected = [f"{w}:{i}" for w in range(workers) for i in range(per_worker)]
    tokens = state.extra["tokens"]
    assert sorted(tokens) == sorted(expected)
    assert len(tokens) == total
    assert state.extra["updates"] == total
    assert state.version == total + 1
    # Each process's own updates landed in its order.
    for w in range(workers):
        mine = [t for t in tokens if t.startswith(f"{w}:")]
        assert mine == [f"{w}:{i}" for i in range(per_worker)]
    assert state.stop_requested is True
    assert set(os.listdir(store.path.parent)) == {"state.json", "state.json.lock", "go"}


_HOLDER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from autopilot.store.state import StateStore
    path = Path(sys.argv[1])
    def hold(state):
        state.extra["holder"] = True
        path.with_name("holding").touch()
        time.sleep(600)
    StateStore(path).update(hold)
    """
)


@pytest.fixture
def lock_holder(store: StateStore) -> Iterator[subprocess.Popen[bytes]]:
    """A separate process that holds the state lock (inside ``update``) until killed."""
    proc = subprocess.Popen([sys.executable, "-c", _HOLDER, str(store.path)])
    holding = store.path.with_name("holding")
    deadline = time.monotonic() + 30
    while not holding.exists():
        assert proc.poll() is None, "the lock holder died"
        assert time.monotonic() < deadline, "the lock holder never took the lock"
        time.sleep(0.01)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


def _lock_is_free(store: StateStore) -> bool:
    fd = os.open(store.path.with_name("state.json.lock"), os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    finally:
        os.close(fd)  # closing releases a lock we got
    return True


def test_a_killed_lock_holder_leaves_the_run_unlocked(
    store: StateStore, lock_holder: subprocess.Popen[bytes]
) -> None:
    assert not _lock_is_free(store)
    lock_holder.send_signal(signal.SIGKILL)
    assert lock_holder.wait(timeout=10) == -signal.SIGKILL
    assert _lock_is_free(store)
    # Another process gets the lock right away and nothing of the dead holder's write landed.
    probe = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from pathlib import Path; from autopilot.store.state import StateStore;"
            "import autopilot.store.state as s; s.LOCK_TIMEOUT_SECONDS = 1.0;"
            "st = StateStore(Path(sys.argv[1])); print(st.update(lambda d: d.extra.update(after=True)).version)",
            str(store.path),
        ],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert (probe.returncode, probe.stdout.strip()) == (0, "2"), probe.stderr
    assert store.read().to_json() == _json(INITIAL, after=True, version=2)


def test_readers_do_not_block_while_another_process_holds_the_lock(
    store: StateStore, lock_holder: subprocess.Popen[bytes]
) -> None:
    assert not _lock_is_free(store)
    result: list[RunState] = []
    reader = threading.Thread(target=lambda: result.append(StateStore(store.path).read()))
    reader.start()
    reader.join(timeout=5)
    assert not reader.is_alive(), "read() waited for the lock"
    assert [state.to_json() for state in result] == [_json(INITIAL, version=1)]
    assert lock_holder.poll() is None
