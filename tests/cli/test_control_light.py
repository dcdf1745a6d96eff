"""``pause``, ``resume`` and ``stop`` on plain JSON (``cli.control_light``) say and write
what the typed path (``autopilot.control``, through ``control_light.pause_in``, …) says and
writes, byte for byte, whatever the run's state; and they load no dataclass."""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from autopilot.cli import control_light
from autopilot.core.vocabulary import HOOK_MODE, RunStatus
from autopilot.errors import AutopilotError
from autopilot.loop.clock import SystemClock
from autopilot.store.flock import FileLock
from autopilot.store.run_state import RunState, decode_state
from autopilot.store.state import encode_state

_RUN = "proj-1700000000000"
_NOW_MS = 1_700_000_500_000


@st.composite
def _run_states(draw: st.DrawFn) -> RunState:
    terminated = draw(st.booleans())
    return RunState(
        run_id=_RUN,
        cwd=draw(st.sampled_from([None, "/nowhere/project"])),
        mode=draw(st.sampled_from(["prompt", "backlog", HOOK_MODE])),
        status=draw(st.sampled_from(list(RunStatus))),
        paused=draw(st.booleans()),
        paused_at_ms=draw(st.one_of(st.none(), st.integers(0, _NOW_MS), st.just(_NOW_MS + 5))),
        total_paused_ms=draw(st.integers(0, 10**6)),
        stop_requested=draw(st.booleans()),
        stop_now=draw(st.booleans()),
        stop_reason=draw(st.sampled_from([None, "autopilot stop", "budget"])),
        hold=draw(st.sampled_from([None, "tasks.jsonl line 3 is broken"])),
        terminated=terminated,
        termination_reason="user_stopped" if terminated else None,
        version=draw(st.integers(0, 50)),
    )


def _commands() -> list[tuple[str, Callable[[], int], Callable[[Path], int]]]:
    return [
        ("pause", lambda: control_light.pause(_RUN), control_light.pause_in),
        ("resume", lambda: control_light.resume(_RUN), control_light.resume_in),
        (
            "stop",
            lambda: control_light.stop(False, _RUN),
            lambda f: control_light.stop_in(f, False),
        ),
        (
            "stop --now",
            lambda: control_light.stop(True, _RUN),
            lambda f: control_light.stop_in(f, True),
        ),
    ]


def _outcome(act: Callable[[], int], capsys: pytest.CaptureFixture[str]) -> tuple[object, str]:
    capsys.readouterr()
    try:
        result: object = act()
    except AutopilotError as error:
        result = f"{type(error).__name__}: {error}"
    return result, capsys.readouterr().out


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(_run_states(), st.sampled_from(range(4)), st.booleans())
@example(RunState(run_id=_RUN, paused=True, paused_at_ms=_NOW_MS + 5), 1, True)  # clock behind
@example(RunState(run_id=_RUN, paused=True, paused_at_ms=_NOW_MS - 7, total_paused_ms=3), 1, True)
def test_light_and_typed_commands_agree(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    state: RunState,
    which: int,
    canonical: bool,
) -> None:
    """With a driver holding the run (its ``driver.lock`` taken), as ``autopilot run``
    does: the light path's answer and exit are the typed path's, and so is its
    ``state.json``: the same bytes from a file the typed path wrote (``canonical``),
    the same state as ``decode_state`` reads it from any other."""
    name, light, typed = _commands()[which]
    if canonical:  # as a typed write leaves it: ``label`` filled in from ``runId``, …
        state = decode_state(state.to_json())
    monkeypatch.setattr(SystemClock, "now_ms", lambda self: _NOW_MS)
    with tempfile.TemporaryDirectory() as tmp:
        roots = [Path(tmp) / "light", Path(tmp) / "typed"]
        folder = roots[0] / _RUN
        folder.mkdir(parents=True)
        (folder / "state.json").write_bytes(encode_state(state))
        shutil.copytree(roots[0], roots[1])
        results = []
        for root, act in ((roots[0], light), (roots[1], lambda: typed(roots[1] / _RUN))):
            monkeypatch.setenv("AUTOPILOT_RUNS_DIR", str(root))
            monkeypatch.chdir(tmp)
            driver = FileLock(root / _RUN / "driver.lock")
            assert driver.acquire()
            try:
                results.append(_outcome(act, capsys))
            finally:
                driver.release()
            results.append((root / _RUN / "state.json").read_bytes())
        assert results[0] == results[2], name
        assert _decoded(results[1]) == _decoded(results[3]), name
        if canonical:
            assert results[1] == results[3], name


def _decoded(written: object) -> dict[str, object]:
    assert isinstance(written, bytes)
    return decode_state(json.loads(written)).to_json()


def test_the_light_path_is_taken_for_a_plain_live_run(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """It can fail: a state the light path takes is not handed to ``control_body``."""
    folder = tmp_path / _RUN
    folder.mkdir()
    (folder / "state.json").write_bytes(encode_state(RunState(run_id=_RUN, paused=True)))
    monkeypatch.setenv("AUTOPILOT_RUNS_DIR", str(tmp_path))

    def typed(*args: object) -> int:
        raise AssertionError("taken by the typed path")

    for name in ("pause_in", "resume_in", "stop_in"):
        monkeypatch.setattr(control_light, name, typed)
    driver = FileLock(folder / "driver.lock")
    assert driver.acquire()
    try:
        assert control_light.resume(_RUN) == 0
        assert control_light.pause(_RUN) == 0
        assert control_light.stop(False, _RUN) == 0
    finally:
        driver.release()
    assert capsys.readouterr().out.splitlines() == [
        f"{_RUN}: resumed",
        f"{_RUN}: pause requested; it takes effect at the next boundary",
        f"{_RUN}: stop requested; the run stops at the next boundary",
    ]


@pytest.mark.parametrize("status", [None, "exploded", 7])
@pytest.mark.parametrize("which", range(4))
def test_a_status_word_the_typed_reader_derives_is_written_as_the_typed_path_writes_it(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    status: object,
    which: int,
) -> None:
    """A hand-edited ``status`` (missing, unknown, not a word): the light path leaves
    it to the typed one, which derives it before the change (a pause asked for is
    ``running (pause requested)``, not ``paused``)."""
    name, light, typed = _commands()[which]
    monkeypatch.setattr(SystemClock, "now_ms", lambda self: _NOW_MS)
    data = json.loads(encode_state(RunState(run_id=_RUN, cwd=None)))
    data["status"] = status
    written = []
    for root, act in ((tmp_path / "light", light), (tmp_path / "typed", None)):
        folder = root / _RUN
        folder.mkdir(parents=True)
        (folder / "state.json").write_text(json.dumps(data))
        monkeypatch.setenv("AUTOPILOT_RUNS_DIR", str(root))
        monkeypatch.chdir(tmp_path)
        driver = FileLock(folder / "driver.lock")
        assert driver.acquire()
        try:
            _outcome(act or (lambda folder=folder: typed(folder)), capsys)
        finally:
            driver.release()
        written.append(json.loads((folder / "state.json").read_bytes()))
    assert written[0] == written[1], name
    if status != 7:  # a status of the wrong JSON type is refused (corrupt) by both
        assert written[0]["status"] == "running", name
