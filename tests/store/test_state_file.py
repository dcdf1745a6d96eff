"""``store.state_file`` reads ``state.json`` as ``decode_state`` does: the same files
refused with the same line, the same value for every field ``StateView`` has, and
``config``'s fields are ``RunConfig``'s."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from autopilot.config import RunConfig
from autopilot.config_json import CONFIG_FIELDS
from autopilot.core.structs import replace
from autopilot.core.vocabulary import RunStatus
from autopilot.errors import StateFileError
from autopilot.store.run_state import RunState, decode_state
from autopilot.store.state import encode_state
from autopilot.store.state_file import (
    MAX_STATE_DEPTH,
    StateView,
    check_state_json,
    encode_state_json,
    read_state_json,
    read_state_view,
    update_state_json,
)

VIEWED = (
    "run_id",
    "mode",
    "cwd",
    "terminated",
    "termination_reason",
    "status",
    "paused",
    "paused_at_ms",
    "total_paused_ms",
    "stop_requested",
    "stop_now",
    "hold",
    "version",
    "extra",
    "pid",
    "pid_start_time",
    "pid_command",
    "host",
    "supervisor_pid",
    "supervisor_start_time",
)
"""``StateView``'s properties: each is ``RunState``'s attribute of the same name."""


def test_the_view_has_every_property_named_here() -> None:
    names = {n for n in dir(StateView) if isinstance(getattr(StateView, n), property)}
    assert names == set(VIEWED)


def test_config_fields_are_run_configs() -> None:
    names = tuple(name for name in RunConfig.__struct_fields__ if name != "sources")
    assert names == CONFIG_FIELDS


_ODD = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-5, max_value=2 * 10**15),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=8),
    st.sampled_from([s.value for s in RunStatus] + ["later-status", "complete", "error"]),
    st.lists(st.integers(0, 3), max_size=2),
    st.dictionaries(st.text(max_size=3), st.integers(0, 3), max_size=2),
)
_KEYS = (
    "runId",
    "mode",
    "cwd",
    "terminated",
    "terminationReason",
    "status",
    "paused",
    "pausedAt",
    "totalPausedMs",
    "stopRequested",
    "stopNow",
    "hold",
    "version",
    "iter",
    "resetOn",
    "spend",
    "config",
    "worktree",
    "parallel",
    "pid",
    "pidStartTime",
    "pidCommand",
    "host",
    "supervisorPid",
    "supervisorStartTime",
)
_CONFIGS = st.one_of(
    st.none(),
    st.just({"completion_match": "sometimes"}),
    st.just({"max_iterations": 3, "notify": []}),
    st.dictionaries(st.sampled_from(CONFIG_FIELDS), _ODD, max_size=3),
    _ODD,
)


@st.composite
def _states(draw: st.DrawFn) -> dict[str, Any]:
    """A ``state.json`` object: a valid one as ``RunState`` writes it, with some fields
    changed to any JSON value, removed, or ``config`` replaced."""
    data = RunState(run_id="p-1700000000000", cwd="/p", version=draw(st.integers(0, 9))).to_json()
    for key in draw(st.lists(st.sampled_from(_KEYS), max_size=5)):
        choice = draw(st.integers(0, 2))
        if choice == 0:
            data.pop(key, None)
        elif key == "config":
            data[key] = draw(_CONFIGS)
        else:
            data[key] = draw(_ODD)
    return data


def _ended_by_node(reason: str) -> dict[str, Any]:
    data = RunState(run_id="p-1700000000000").to_json()
    del data["status"]
    data.update(terminated=True, terminationReason=reason)
    return data


@settings(max_examples=400, deadline=None)
@given(_states())
@example(_ended_by_node("complete"))
@example(_ended_by_node("error"))
@example(_ended_by_node("user_stopped"))
@example({**RunState().to_json(), "status": None, "paused": True})
def test_the_view_refuses_and_reads_as_decode_state(data: dict[str, Any]) -> None:
    try:
        state = decode_state(data, "s.json")
    except StateFileError as refused:
        with pytest.raises(StateFileError) as also:
            check_state_json(data, "s.json")
        assert str(also.value) == str(refused)
        return
    check_state_json(data, "s.json")
    view = StateView(data)
    for name in VIEWED:
        assert getattr(view, name) == getattr(state, name), name


def test_a_light_change_writes_what_the_typed_one_writes(tmp_path: Path) -> None:
    """Of a file ``RunState`` wrote, the bytes are the same."""
    state = RunState(run_id="p-1700000000000", cwd="/p", paused=True, paused_at_ms=5, version=3)
    path = tmp_path / "state.json"
    path.write_bytes(encode_state(state))

    def change(view: StateView) -> None:
        view.set("paused", False)
        view.set("pausedAt", None)

    written = update_state_json(path, change)
    expected = replace(state, paused=False, paused_at_ms=None, version=4)
    assert path.read_bytes() == encode_state(expected)
    assert encode_state_json(written.data) == encode_state(expected)
    assert read_state_view(path).version == 4


def test_a_change_that_raises_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    path.write_bytes(encode_state(RunState(run_id="p-1700000000000")))
    before = path.read_bytes()

    def change(view: StateView) -> None:
        view.set("paused", True)
        raise LookupError

    with pytest.raises(LookupError):
        update_state_json(path, change)
    assert path.read_bytes() == before


def _nested(depth: int) -> dict[str, Any]:
    """A state whose ``extra`` makes the whole file ``depth`` objects deep."""
    value: dict[str, Any] = {}
    for _ in range(depth - 2):
        value = {"a": value}
    return {"iter": 1, "forged": value}


@pytest.mark.parametrize("depth", [MAX_STATE_DEPTH, MAX_STATE_DEPTH + 1, 500])
def test_a_state_nested_too_deep_is_corrupt_not_a_recursion_error(
    tmp_path: Path, depth: int
) -> None:
    path = tmp_path / "state.json"
    path.write_text(json.dumps(_nested(depth)))
    if depth <= MAX_STATE_DEPTH:
        assert read_state_json(path)["iter"] == 1
        return
    with pytest.raises(StateFileError, match=f"nests deeper than {MAX_STATE_DEPTH} levels"):
        read_state_json(path)


def test_arrays_count_toward_the_depth_as_objects_do(tmp_path: Path) -> None:
    value: Any = []
    for _ in range(MAX_STATE_DEPTH):
        value = [value]
    path = tmp_path / "state.json"
    path.write_text(json.dumps({"forged": value}))
    with pytest.raises(StateFileError, match="nests deeper"):
        read_state_json(path)


def test_a_fifo_where_state_json_should_be_is_a_corrupt_state_not_a_reader_held_forever(
    tmp_path: Path,
) -> None:
    """Nothing writes to it: a reader that opened it blocking would wait forever
    (``run``'s rival check, ``status``, ``doctor``)."""
    import os
    import threading

    from autopilot.store.state_file import read_state_json

    path = tmp_path / "state.json"
    os.mkfifo(path)
    failures: list[BaseException] = []

    def read() -> None:
        try:
            read_state_json(path)
        except BaseException as error:
            failures.append(error)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(10)
    if reader.is_alive():  # let the stuck reader go: a writer that opens and closes
        os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
        reader.join(10)
    assert [type(e) for e in failures] == [StateFileError]
    assert "not a regular file" in str(failures[0])
