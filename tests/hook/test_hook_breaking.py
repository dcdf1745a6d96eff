"""Trying to break hook mode: two sessions, empty and torn transcripts, a compaction,
malformed input, a deleted run, a full disk. Each Stop here is the real
``autopilot hook claude-stop`` process where the process matters (its stdin, its
exit, its writes); whatever goes wrong, the session is let stop, the reason is one
line on stderr, and nothing the run recorded is lost or corrupted."""

from __future__ import annotations

import json
import resource
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from autopilot.store.hook_registry import entry_path
from autopilot.store.paths import runs_root
from tests.fakes import FakeClock
from tests.hook import sessions as hooked


def _hook(
    project: Path, stdin: bytes, *, file_size_limit: int | None = None
) -> subprocess.CompletedProcess[bytes]:
    def limit() -> None:  # a full disk, as far as the hook's writes can tell
        if file_size_limit is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (file_size_limit, file_size_limit))

    return subprocess.run(
        [sys.executable, "-m", "autopilot", "hook", "claude-stop"],
        input=stdin,
        capture_output=True,
        cwd=project,
        preexec_fn=limit,
        check=False,
        timeout=120,
    )


def test_of_two_sessions_stopping_at_once_only_one_claims_the_run(
    tmp_path: Path, project: Path
) -> None:
    run_id = hooked.arm(project, FakeClock(ms_now()))
    first, second = (
        hooked.Session(tmp_path, project, "left"),
        hooked.Session(tmp_path, project, "right"),
    )
    started = [
        subprocess.Popen(
            [sys.executable, "-m", "autopilot", "hook", "claude-stop"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=project,
        )
        for _ in (first, second)
    ]
    answers = [
        process.communicate(session.stop_input(last="hi"), timeout=120)
        for process, session in zip(started, (first, second), strict=True)
    ]
    blocked = [out for out, _err in answers if out]
    assert len(blocked) == 1 and all(err == b"" for _out, err in answers)
    claims = [e for e in hooked.events_of(run_id) if e["type"] == "hook_session"]
    assert len(claims) == 1
    owner = first if claims[0]["sessionId"] == "left" else second
    other = second if owner is first else first
    # From now on the other terminal's session is never continued, nor counted.
    for _ in range(3):
        assert _hook(project, other.stop_input(last="mine")).stdout == b""
    assert _hook(project, owner.stop_input(active=True, last="x")).stdout
    assert hooked.kinds_of(run_id, "iteration_start") == [
        ("iteration_start", 1),
        ("iteration_start", 2),
    ]


def ms_now() -> int:
    import time

    return int(time.time() * 1000)


@pytest.mark.parametrize(
    "last_line",
    [
        pytest.param({"content": [{"type": "tool_use", "id": "t", "name": "Bash"}]}, id="tool-use"),
        pytest.param({"content": [{"type": "text", "text": "   "}]}, id="blank-text"),
        pytest.param({"content": []}, id="no-content"),
        pytest.param(None, id="empty-line"),
        pytest.param("torn", id="torn-line"),
    ],
)
@pytest.mark.parametrize("last_message", [None, ""])
def test_a_last_transcript_line_without_text_means_go_on_and_keeps_the_run(
    tmp_path: Path, project: Path, last_line: Any, last_message: str | None
) -> None:
    clock, run_id, session = hooked.armed_session(tmp_path, project)
    session.say("armed")
    hooked.blocks(session.stop(clock, last="armed"))
    session.say("working on it")
    with session.transcript.open("a") as handle:
        if last_line is None:
            handle.write("\n\n")
        elif last_line == "torn":
            handle.write('{"type":"assistant","message":{"content":[{"type":"te')
        else:
            entry = {"type": "assistant", "uuid": "last", "message": {"id": "z", **last_line}}
            handle.write(json.dumps(entry) + "\n")
    answer = _hook(project, session.stop_input(active=True, last=last_message))
    assert answer.returncode == 0 and answer.stderr == b""
    assert json.loads(answer.stdout)["decision"] == "block"
    state = hooked.state_of(run_id)
    assert (state["terminated"], state["iter"], state["iterationOpen"]) == (False, 2, True)
    assert entry_path(runs_root(), run_id).exists()


def test_a_compaction_lets_the_session_stop_and_the_next_prompt_picks_the_run_up(
    tmp_path: Path, project: Path
) -> None:
    clock, run_id, session = hooked.armed_session(tmp_path, project)
    hooked.blocks(session.stop(clock, last="armed"))
    session.say("a long turn")
    with session.transcript.open("a") as handle:
        handle.write(json.dumps({"type": "system", "subtype": "compact_boundary"}) + "\n")
    for active in (True, True):  # the CLI's own loop guard may ask again: still let through
        note = json.loads(session.stop(clock, active=active))["systemMessage"]
        assert "compacting" in note
    assert hooked.kinds_of(run_id, "iteration_start", "iteration_end") == [
        ("iteration_start", 1),
        ("iteration_end", 1),
    ]
    session.prompt("go on")
    assert hooked.blocks(session.stop(clock, last="back")).startswith(hooked.PROMPT)
    assert hooked.kinds_of(run_id, "iteration_start")[-1] == ("iteration_start", 2)


@pytest.mark.parametrize(
    "stdin",
    [
        b"",
        b"{",
        b"[]",
        b"null",
        b"\xff\xfe\x00",
        b'{"session_id": 5, "hook_event_name": ["Stop"]}',
        b'{"session_id": "", "transcript_path": 7}',
        b"[" * 100_000,
        b"x" * (5 << 20),
    ],
    ids=[
        "empty",
        "torn",
        "array",
        "null",
        "binary",
        "wrong-types",
        "empty-session",
        "deep",
        "over-4-MiB",
    ],
)
def test_malformed_input_lets_the_session_stop_and_touches_nothing(
    project: Path, stdin: bytes
) -> None:
    run_id = hooked.arm(project, FakeClock(), session=hooked.SESSION)
    before = (runs_root() / run_id / "state.json").read_bytes()
    done = _hook(project, stdin)
    assert (done.returncode, done.stdout) == (0, b"")
    assert len(done.stderr.splitlines()) <= 1 and b"Traceback" not in done.stderr
    assert (runs_root() / run_id / "state.json").read_bytes() == before
    assert entry_path(runs_root(), run_id).exists()


def test_a_deleted_run_folder_lets_the_session_stop_and_leaves_the_registry(
    tmp_path: Path, project: Path
) -> None:
    run_id = hooked.arm(project, FakeClock(), session=hooked.SESSION)
    session = hooked.Session(tmp_path, project)
    shutil.rmtree(runs_root() / run_id)
    done = _hook(project, session.stop_input(last="x"))
    assert (done.returncode, done.stdout) == (0, b"")
    assert done.stderr.decode().startswith(f"autopilot: run {run_id}: the run's folder")
    assert "no longer armed" in done.stderr.decode()
    assert not entry_path(runs_root(), run_id).exists()
    again = _hook(project, session.stop_input(last="x"))
    assert (again.stdout, again.stderr) == (b"", b"")


def test_a_full_disk_lets_the_session_stop_and_the_run_goes_on_once_there_is_room(
    tmp_path: Path, project: Path
) -> None:
    run_id = hooked.arm(project, FakeClock(), session=hooked.SESSION)
    session = hooked.Session(tmp_path, project)
    session.say("armed")
    full = _hook(project, session.stop_input(last="armed"), file_size_limit=1)
    assert (full.returncode, full.stdout) == (0, b"")
    assert b"letting the session stop" in full.stderr and b"Traceback" not in full.stderr
    assert hooked.state_of(run_id)["iter"] == 0
    assert hooked.blocks(_hook(project, session.stop_input(last="armed")).stdout.decode())
    session.say("working")
    full = _hook(
        project,
        session.stop_input(active=True, last="w"),
        file_size_limit=1,
    )
    assert (full.returncode, full.stdout) == (0, b"")
    assert hooked.state_of(run_id)["iterationOpen"] is True  # nothing half written
    session.say("more")
    hooked.blocks(_hook(project, session.stop_input(last="more")).stdout.decode())
    assert hooked.kinds_of(run_id, "iteration_start", "iteration_end") == [
        ("iteration_start", 1),
        ("iteration_end", 1),
        ("iteration_start", 2),
    ]
    prompts = sorted(p.name for p in (runs_root() / run_id).glob("iter-*"))
    assert prompts == ["iter-0001", "iter-0002"]  # the failed start left no second folder
