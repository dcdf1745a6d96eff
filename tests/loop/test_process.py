"""One agent process (GitHub issues agrimsingh/ralph-wiggum-cursor#13,
anthropics/claude-code#61416, alexknowshtml/smaug#10, frankbria/ralph-claude-code#198,
dcellison/kai#623)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import psutil
import pytest

from autopilot.agents.base import IterationReport
from autopilot.loop.process import EndedBy, ProcessLimits, ProcessResult
from tests.conftest import FakeAgent
from tests.loop.agent_process import FAKE_AGENT, run_agent


def _run(
    tmp_path: Path, env: dict[str, str], limits: ProcessLimits, stdin: bytes | None = b"hi"
) -> tuple[ProcessResult, IterationReport, list[str], int | None]:
    return run_agent(tmp_path, FAKE_AGENT, env, limits=limits, stdin=stdin)


def _assert_group_gone(pgid: int | None) -> None:
    assert pgid is not None
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        left = [p for p in psutil.process_iter(["pid"]) if _pgid(p.pid) == pgid]
        if not left:
            return
        time.sleep(0.05)
    raise AssertionError(f"processes left in group {pgid}: {left}")


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except OSError:
        return None


def test_result_then_hang_ends_after_grace(tmp_path: Path, fake_agent: FakeAgent) -> None:
    # Issue anthropics/claude-code#61416: the CLI prints its result and never exits.
    env = fake_agent([[{"result": "done. COMPLETE"}, {"sleep": 600}]])
    result, report, _, pid = _run(tmp_path, env, ProcessLimits(result_grace_seconds=0.5))
    assert result.ended_by is EndedBy.RESULT_GRACE
    assert report.final_message == "done. COMPLETE"
    assert result.duration_seconds < 30
    _assert_group_gone(pid)


def test_grandchild_holding_stdout_does_not_hang(tmp_path: Path, fake_agent: FakeAgent) -> None:
    env = fake_agent([[{"hold_stdout": 600}, {"text": "bye"}]])
    result, report, _, pid = _run(tmp_path, env, ProcessLimits(result_grace_seconds=0.5))
    assert result.ended_by is EndedBy.RESULT_GRACE
    assert result.exit_code == 0
    assert report.last_root_text == "bye"
    _assert_group_gone(pid)


def test_idle_timeout(tmp_path: Path, fake_agent: FakeAgent) -> None:
    env = fake_agent([[{"text": "thinking"}, {"sleep": 600}]])
    result, _, _, pid = _run(tmp_path, env, ProcessLimits(idle_timeout_seconds=1.0))
    assert result.ended_by is EndedBy.IDLE_TIMEOUT
    _assert_group_gone(pid)


def test_wall_clock_timeout_with_steady_output(tmp_path: Path, fake_agent: FakeAgent) -> None:
    steps = [step for _ in range(200) for step in ({"text": "tick"}, {"sleep": 0.05})]
    env = fake_agent([steps])
    result, _, _, _ = _run(
        tmp_path, env, ProcessLimits(timeout_seconds=1.5, idle_timeout_seconds=1)
    )
    assert result.ended_by is EndedBy.TIMEOUT


def test_stopped_child_counts_as_no_progress(tmp_path: Path, fake_agent: FakeAgent) -> None:
    # Issue alexknowshtml/smaug#10: a child stopped by SIGTTIN/SIGSTOP looks alive to kill -0.
    env = fake_agent([[{"stop_self": True}, {"result": "never"}]])
    result, report, _, pid = _run(tmp_path, env, ProcessLimits(idle_timeout_seconds=2.5))
    assert result.ended_by is EndedBy.IDLE_TIMEOUT
    assert result.was_stopped is True
    assert report.result_seen is False
    _assert_group_gone(pid)


def test_sigterm_ignoring_agent_is_killed(tmp_path: Path, fake_agent: FakeAgent) -> None:
    env = fake_agent([[{"ignore_sigterm": True}, {"result": "ok"}, {"sleep": 600}]])
    limits = ProcessLimits(result_grace_seconds=0.2, kill_grace_seconds=0.5)
    result, _, _, pid = _run(tmp_path, env, limits)
    assert result.ended_by is EndedBy.RESULT_GRACE
    _assert_group_gone(pid)


def test_invalid_utf8_is_replaced(tmp_path: Path, fake_agent: FakeAgent) -> None:
    env = fake_agent([[{"raw_hex": "7b22ff22fe7d"}, {"result": "fine"}]])
    result, report, lines, _ = _run(tmp_path, env, ProcessLimits())
    assert result.ended_by is EndedBy.EXIT
    assert any("\ufffd" in line for line in lines)
    assert report.final_message == "fine"
    assert report.bad_lines >= 1


def test_multi_megabyte_lines_and_the_result_after_them(
    tmp_path: Path, fake_agent: FakeAgent
) -> None:
    # Issue dcellison/kai#623: a 132 KB / 1 MiB / 20 MiB line must not lose the result line.
    env = fake_agent(
        [
            [
                {"big_line": 132_000},
                {"big_line": 3_000_000},
                {"big_line": 20_000_000},
                {"result": "after bulk COMPLETE"},
            ]
        ]
    )
    limits = ProcessLimits(max_line_bytes=16 * 1024 * 1024)
    result, report, lines, _ = _run(tmp_path, env, limits)
    assert result.oversized_lines == 1
    assert report.final_message == "after bulk COMPLETE"
    assert max(len(line) for line in lines) > 3_000_000
    assert (tmp_path / "stdout.log").stat().st_size == result.stdout_bytes > 23_000_000


def test_truncated_stream_parses_every_complete_line(tmp_path: Path, fake_agent: FakeAgent) -> None:
    # Issue frankbria/ralph-claude-code#198: the output ends with a half-written JSON line and no result.
    env = fake_agent([[{"text": "made 20 commits"}, {"raw": '{"type":"result","res'}, {"exit": 1}]])
    result, report, _, _ = _run(tmp_path, env, ProcessLimits())
    assert result.exit_code == 1
    assert report.last_root_text == "made 20 commits"
    assert report.result_seen is False


def test_stdin_is_dev_null_when_no_prompt_goes_there(tmp_path: Path, fake_agent: FakeAgent) -> None:
    env = fake_agent([[{"echo_prompt": True}, {"result": "ok"}]])
    _, report, _, _ = _run(tmp_path, env, ProcessLimits(), stdin=None)
    assert report.last_root_text == ""


@pytest.mark.parametrize("copies", [1, 20_000])  # written at once; mostly by a thread
def test_prompt_on_stdin_arrives_whole(tmp_path: Path, fake_agent: FakeAgent, copies: int) -> None:
    prompt = 'fix #3639 $(hostname) `id` Bob\'s "code"; rm -rf * [x]\n- [ ] *.ts\n' * copies
    env = fake_agent([[{"echo_prompt": True}, {"result": "ok"}]])
    _, report, _, _ = _run(tmp_path, env, ProcessLimits(), stdin=prompt.encode())
    assert report.last_root_text == prompt


def test_launch_failure_is_reported_not_raised(tmp_path: Path) -> None:
    result, _, _, pid = run_agent(
        tmp_path, [str(tmp_path / "no-such-agent")], {}, limits=ProcessLimits(), stdin=None
    )
    assert pid is None
    assert result.ended_by is EndedBy.LAUNCH_FAILED
    assert result.launch_error is not None and "no-such-agent" in result.launch_error


@pytest.mark.parametrize("code", [0, 3, 124])
def test_exit_code_is_kept(tmp_path: Path, fake_agent: FakeAgent, code: int) -> None:
    env = fake_agent([[{"text": "x"}, {"exit": code}]])
    result, _, _, _ = _run(tmp_path, env, ProcessLimits())
    assert (result.ended_by, result.exit_code) == (EndedBy.EXIT, code)


def test_the_driver_touches_a_silent_agents_raw_stdout(
    tmp_path: Path, fake_agent: FakeAgent
) -> None:
    # Crash recovery charges a cut-short attempt up to this heartbeat.
    env = fake_agent([[{"text": "thinking"}, {"sleep": 600}]])
    result, _, _, _ = _run(tmp_path, env, ProcessLimits(idle_timeout_seconds=3.0))
    ended = time.time()
    assert result.ended_by is EndedBy.IDLE_TIMEOUT
    stdout = tmp_path / "stdout.log"
    assert stdout.read_text().count("thinking") == 1
    # Its last write came 3 s (the idle timeout) before the end; the beats came later.
    assert ended - stdout.stat().st_mtime < 3.0


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="Linux /proc only")
def test_a_thread_ending_while_the_children_are_read_does_not_hide_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A write thread that ends between the listing of this process's threads and the
    read of its ``children`` file makes the reading start again, not give up (which
    would cost a look at the whole process table after every agent)."""
    import subprocess

    from autopilot.loop import agent_group

    child = subprocess.Popen(["sleep", "5"])
    try:
        real_open = os.open
        vanished: list[str] = []

        def open_once_gone(path: str, flags: int) -> int:
            if path.endswith("/children") and not vanished:
                vanished.append(path)
                raise FileNotFoundError(path)
            return real_open(path, flags)

        monkeypatch.setattr(agent_group.os, "open", open_once_gone)
        children = agent_group.children_of_this_process()
        assert vanished
        assert children is not None and child.pid in children
    finally:
        child.kill()
        child.wait()
