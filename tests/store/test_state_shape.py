"""``state.json`` that is JSON but of the wrong shape, and strings that are not UTF-8."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from autopilot.config import RunConfig
from autopilot.core.vocabulary import RunStatus
from autopilot.errors import EnvironmentProblem, StateFileError
from autopilot.loop.arming import arm_run
from autopilot.loop.clock import SystemClock
from autopilot.store.run_state import PromptSource, RunState, decode_state
from autopilot.store.state import (
    StateStore,
    encode_state,
    read_state,
    read_state_json,
    read_state_quietly,
)
from tests.store.node_run import node_state


@pytest.fixture
def armed(tmp_path: Path) -> Path:
    """The ``state.json`` of a run armed the real way."""
    root = tmp_path / "runs"
    root.mkdir()
    run_id = arm_run(
        root,
        RunConfig(max_cost_usd=2.5, max_duration_seconds=3600),
        PromptSource(text="do it"),
        tmp_path,
        SystemClock(),
        extra_args=("--verbose",),
    )
    return root / run_id / "state.json"


def _rewrite(path: Path, change: dict[str, Any]) -> bytes:
    state = json.loads(path.read_text())
    for key, value in change.items():
        if "." in key:
            outer, inner = key.split(".", 1)
            state[outer][inner] = value
        else:
            state[key] = value
    content = json.dumps(state, indent=2).encode()
    path.write_bytes(content)
    return content


def test_an_armed_state_has_the_shape_autopilot_reads(armed: Path) -> None:
    state = read_state(armed)
    assert state.config == RunConfig(max_cost_usd=2.5, max_duration_seconds=3600)
    assert state.extra_args == ("--verbose",)
    # One decode, one encode: the file is exactly what the typed state writes.
    assert read_state_json(armed) == state.to_json()
    assert decode_state(state.to_json()) == state


@pytest.mark.parametrize(
    ("change", "field", "wanted"),
    [
        ({"spend": "x"}, "spend", "an object"),
        ({"iter": "abc"}, "iter", "a whole number"),
        ({"iter": 1.5}, "iter", "a whole number"),
        ({"iter": True}, "iter", "a whole number"),
        ({"iter": -1}, "iter", "a whole number"),
        ({"config": [1]}, "config", "an object"),
        ({"loop": 3}, "loop", "an object"),
        ({"paused": "yes"}, "paused", "true or false"),
        ({"prompt": 5}, "prompt", "an object"),
        ({"prompt": {"text": 5}}, "prompt.text", "a string"),
        ({"extraArgs": ["ok", 1]}, "extraArgs", "a list of strings"),
        ({"startedAt": 1e308}, "startedAt", "a number"),
        ({"spend.tokens": {"input": "many", "output": 0}}, "spend.tokens.input", "whole"),
        ({"spend.costUsd": "1"}, "spend.costUsd", "a number"),
        ({"loop.failureStreak": []}, "loop.failureStreak", "a whole number"),
        ({"usageBaseline": {"sessionId": "s", "input": "x"}}, "usageBaseline.input", "whole"),
        ({"sessionId": {"id": 1}}, "sessionId", "a string"),
        (
            {"config.completion_match": "sometimes"},
            "config.completion_match",
            "one of sentence, word",
        ),
        ({"config.context": "forever"}, "config.context", "one of fresh, continue"),
        ({"config.max_iterations": "10"}, "config.max_iterations", "a whole number"),
        ({"config.max_iterations": None}, "config.max_iterations", "must not be null"),
        ({"config.min_iterations": 0}, "config.min_iterations", "at least 1"),
        ({"config.max_duration_seconds": 1e306}, "config.max_duration_seconds", "10 years"),
        ({"config.max_cost_usd": -1}, "config.max_cost_usd", "non-negative"),
        ({"config.completion_promise": "two words"}, "config.completion_promise", "one word"),
    ],
)
def test_a_state_of_the_wrong_shape_is_a_one_line_state_file_error(
    armed: Path, change: dict[str, Any], field: str, wanted: str
) -> None:
    content = _rewrite(armed, change)
    store = StateStore(armed)
    for action in (lambda: read_state(armed), store.read, lambda: store.update(lambda s: None)):
        with pytest.raises(StateFileError) as caught:
            action()
        message = str(caught.value)
        assert "\n" not in message
        assert message.startswith(f"{armed}: field '{field}' must ")
        assert wanted in message and message.endswith("(corrupt state file)")
        assert isinstance(caught.value, EnvironmentProblem)
    assert read_state_quietly(armed) is None
    assert armed.read_bytes() == content


@pytest.mark.parametrize("number", [b"NaN", b"Infinity", b"-Infinity", b"1e400"])
def test_numbers_that_are_not_finite_are_corrupt(tmp_path: Path, number: bytes) -> None:
    path = tmp_path / "state.json"
    path.write_bytes(b'{"spend": {"costUsd": ' + number + b"}}")
    with pytest.raises(StateFileError, match=r"field 'spend\.costUsd' must be a number"):
        read_state(path)


@pytest.mark.parametrize("field", ["startedAt", "iter"])
def test_a_whole_number_too_large_for_a_float_is_corrupt_not_a_crash(
    tmp_path: Path, field: str
) -> None:
    path = tmp_path / "state.json"
    path.write_text(json.dumps({field: int("9" * 400)}))
    with pytest.raises(StateFileError, match=f"field '{field}' must be a "):
        read_state(path)


def test_missing_and_null_fields_are_fine(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    state = {"spend": None, "iter": None, "config": None, "loop": {}, "prompt": {"path": None}}
    path.write_text(json.dumps(state))
    read = read_state(path)
    assert (read.iteration, read.spend.iterations, read.config) == (0, 0, RunConfig())
    assert read.prompt == PromptSource()
    assert decode_state({}) == RunState()


def test_unknown_fields_survive_a_round_trip(tmp_path: Path) -> None:
    data = {"iter": 2, "futureField": {"anything": [1, "x"]}, "config": {"future_key": 1}}
    state = decode_state(data, tmp_path / "state.json")
    assert state.iteration == 2
    assert state.extra == {"futureField": {"anything": [1, "x"]}}
    assert decode_state(state.to_json()).to_json()["futureField"] == {"anything": [1, "x"]}


def test_a_state_json_written_by_the_node_implementation_decodes() -> None:
    # What the Node implementation writes (no status, config, spend).
    node = node_state(version=14, iter=3)
    state = decode_state(node)
    assert state.status is RunStatus.COMPLETED and state.completed
    assert (state.agent, state.label, state.iteration) == ("copilot", "ralph-tui-prompt", 3)
    assert (state.max_iterations, state.config.max_iterations, state.spend.iterations) == (5, 5, 3)
    assert state.cwd is None
    assert state.extra == {"resetOn": "iter"}
    stopped = decode_state({**node, "terminationReason": "stopped"})
    assert (stopped.status, stopped.completed) == (RunStatus.STOPPED, False)
    failed = decode_state({**node, "terminationReason": "subprocess_failed"})
    assert failed.status is RunStatus.ERROR
    running = decode_state({**node, "terminated": False, "paused": True})
    assert running.status is RunStatus.PAUSED


def test_a_state_nested_too_deeply_is_corrupt(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    path.write_bytes(b'{"a": ' + b"[" * 100_000 + b"]" * 100_000 + b"}")
    with pytest.raises(StateFileError, match="not valid JSON"):
        read_state(path)


def test_a_wrong_shape_with_a_fallback_is_kept_aside(armed: Path) -> None:
    # The driver passes the state it holds in memory as the fallback.
    fallback = read_state(armed)
    content = _rewrite(armed, {"spend": "x"})
    written = StateStore(armed).update(lambda s: setattr(s, "paused", True), fallback=fallback)
    assert written.to_json() == {**fallback.to_json(), "paused": True, "version": 2}
    assert read_state(armed) == written
    assert (armed.parent / "state.json.corrupt-1").read_bytes() == content


def test_run_config_round_trips_and_defaults_missing_keys() -> None:
    config = RunConfig(model="m", max_tokens=5, abort_promise="STOP", context="continue")
    assert RunConfig.from_json(config.to_json()) == config
    assert RunConfig.from_json({}) == RunConfig()
    assert RunConfig.from_json({"max_cost_usd": None, "unknown": object()}) == RunConfig()
    assert RunConfig.from_json({"result_grace_seconds": 2}).result_grace_seconds == 2


@pytest.mark.parametrize(
    "data",
    [
        [1],
        "config",
        {"agent": 5},
        {"max_tokens": 0},
        {"max_tokens": 10**13},
        {"max_cost_usd": float("nan")},
        {"max_cost_usd": 1e10},
        {"idle_timeout_seconds": 0},
        {"iteration_timeout_seconds": True},
        {"completion_match": None},
        {"prompt_via": "pigeon"},
    ],
)
def test_run_config_from_json_refuses_bad_values(data: Any) -> None:
    with pytest.raises(StateFileError) as caught:
        RunConfig.from_json(data, source="/runs/x/state.json")
    message = str(caught.value)
    assert message.startswith("/runs/x/state.json: field 'config")
    assert message.endswith("(corrupt state file)") and "\n" not in message


def test_encode_state_repairs_lone_surrogates() -> None:
    encoded = encode_state({"sessionId": "\ud83d", "note": "a\udc00b", "\udfffkey": "ok 😀"})
    assert json.loads(encoded) == {"sessionId": "\ufffd", "note": "a\ufffdb", "\ufffdkey": "ok 😀"}


def test_a_lone_surrogate_from_an_agent_is_stored_as_u_fffd(armed: Path) -> None:
    store = StateStore(armed)
    written = store.update(lambda s: setattr(s, "session_id", "\ud83d"))
    assert written.version == 2
    assert read_state(armed).session_id == "\ufffd"
    assert "\ufffd" in armed.read_text(encoding="utf-8")


def test_read_state_repairs_escaped_lone_surrogates(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    path.write_bytes(b'{"model": "m\\ud83d", "label": "\\ud83d\\ude00", "host": "\\\\ud83d"}')
    state = read_state(path)
    assert (state.model, state.label, state.host) == ("m\ufffd", "😀", "\\ud83d")
    assert encode_state(state)
