"""Hook runs without a real CLI: arm, then feed Stop inputs and transcripts as Claude
Code 2.1.197 writes them (docs/hooks.md), and read what the run recorded."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from autopilot.config_sources import build_config
from autopilot.control import pause, resume, stop
from autopilot.core.structs import replace
from autopilot.core.vocabulary import HookAgent
from autopilot.errors import UsageError
from autopilot.hook import control as hook_control
from autopilot.hook.arm import arm_hook_run, session_from_env
from autopilot.loop.clock import SystemClock
from autopilot.store.hook_registry import CliProcess, entry_path, load_armings, locked, write_arming
from autopilot.store.paths import runs_root
from autopilot.store.run_state import PromptSource
from tests.fakes import FakeClock
from tests.hook.sessions import (
    PROMPT,
    SESSION,
    Session,
    arm,
    armed_session,
    blocks,
    events_of,
    kinds_of,
    state_of,
)


def test_a_session_is_continued_until_it_says_the_promise(tmp_path: Path, project: Path) -> None:
    clock = FakeClock()
    run_id = arm(project, clock)
    session = Session(tmp_path, project)
    session.prompt("/autopilot")
    session.say("armed")
    assert blocks(session.stop(clock, last="armed")).startswith(PROMPT)
    assert load_armings(runs_root())[0][0].session_id == SESSION  # claimed
    session.prompt("Stop hook feedback:\n" + PROMPT)
    session.say("half done")
    second = json.loads(session.stop(clock, active=True, last="half done"))
    assert second["systemMessage"] == f"autopilot: run {run_id}, iteration 2"
    session.say("tests pass. COMPLETE")
    assert json.loads(session.stop(clock, active=True, last="tests pass. COMPLETE")) == {
        "systemMessage": f"autopilot: run {run_id} ended: completed (completion_promise)"
    }
    assert kinds_of(run_id, "hook_session", "iteration_start", "iteration_end", "complete") == [
        ("hook_session", None),
        ("iteration_start", 1),
        ("iteration_end", 1),
        ("iteration_start", 2),
        ("iteration_end", 2),
        ("complete", 2),
    ]
    state = state_of(run_id)
    assert (state["status"], state["spend"]["iterations"]) == ("completed", 2)
    assert state["spend"]["tokens"] == {"input": 200, "output": 20}
    assert not entry_path(runs_root(), run_id).exists()
    assert session.stop(clock, last="anything") == ""


def test_another_session_and_an_empty_session_id_are_never_continued(
    tmp_path: Path, project: Path
) -> None:
    clock = FakeClock()
    run_id = arm(project, clock, session="owner")
    other = Session(tmp_path, project, "other")
    other.say("done")
    assert other.stop(clock, last="done") == ""
    empty = Session(tmp_path, project, "")
    assert empty.stop(clock, last="done") == ""
    assert kinds_of(run_id, "iteration_start") == []


def test_a_claim_window_that_passed_claims_nothing(tmp_path: Path, project: Path) -> None:
    clock = FakeClock()
    run_id = arm(project, clock)
    clock.advance(301)
    session = Session(tmp_path, project)
    assert session.stop(clock, last="hi") == ""
    assert kinds_of(run_id, "hook_session", "iteration_start") == []


def test_pause_lets_the_session_stop_and_the_next_prompt_picks_the_run_up(
    tmp_path: Path, project: Path
) -> None:
    clock, run_id, session = armed_session(tmp_path, project)
    blocks(session.stop(clock, last="ok"))
    pause(runs_root() / run_id, clock)
    answer = json.loads(session.stop(clock, active=True, last="working"))
    assert "paused" in answer["systemMessage"]
    assert kinds_of(run_id, "iteration_end", "pause") == [("iteration_end", 1), ("pause", 1)]
    assert state_of(run_id)["status"] == "paused"
    resume(runs_root() / run_id, clock)
    assert kinds_of(run_id, "pause", "resume") == [("pause", 1), ("resume", None)]
    assert state_of(run_id)["status"] == "running"
    resume(runs_root() / run_id, clock)  # nothing paused: nothing logged
    assert kinds_of(run_id, "resume") == [("resume", None)]
    session.prompt("go on")
    assert blocks(session.stop(clock, last="back")).startswith(PROMPT)
    assert kinds_of(run_id, "iteration_start")[-1] == ("iteration_start", 2)


def test_the_off_switch_lets_the_session_stop_and_keeps_the_run(
    tmp_path: Path, project: Path
) -> None:
    clock, run_id, session = armed_session(tmp_path, project)
    (project / ".autopilot").mkdir(exist_ok=True)
    (project / ".autopilot" / "OFF").write_text("")
    assert ".autopilot/OFF" in json.loads(session.stop(clock, last="ok"))["systemMessage"]
    assert kinds_of(run_id, "iteration_start") == []
    assert entry_path(runs_root(), run_id).exists()


def test_the_block_cap_lets_the_turn_end_without_losing_the_run(
    tmp_path: Path, project: Path
) -> None:
    clock, run_id, session = armed_session(tmp_path, project, **{"max-iterations": "0"})
    environ = {"CLAUDE_CODE_STOP_HOOK_BLOCK_CAP": "2"}
    blocks(session.stop(clock, last="first", environ=environ))
    blocks(session.stop(clock, active=True, last="work 1", environ=environ))
    capped = json.loads(session.stop(clock, active=True, last="work 2", environ=environ))
    assert "no more consecutive continuations" in capped["systemMessage"]
    assert state_of(run_id)["terminated"] is False
    session.prompt("keep going")
    blocks(session.stop(clock, active=False, last="work 3", environ=environ))
    assert kinds_of(run_id, "iteration_start")[-1] == ("iteration_start", 3)


def test_the_flush_race_waits_for_the_final_entry(tmp_path: Path, project: Path) -> None:
    clock, run_id, session = armed_session(tmp_path, project)
    session.say("armed")
    blocks(session.stop(clock))

    class Flushing(FakeClock):
        def sleep(self, seconds: float) -> None:
            super().sleep(seconds)
            if self.slept >= 0.5 and session.count == 1:
                session.say("done. <promise>COMPLETE</promise>")  # written late

    late = Flushing(clock.ms)
    assert "ended: completed (completion_promise)" in session.stop(late, active=True)
    assert 0.5 <= late.slept < 2
    assert state_of(run_id)["terminationReason"] == "completion_promise"


def test_a_transcript_that_never_gains_the_line_means_no_promise(
    tmp_path: Path, project: Path
) -> None:
    clock, run_id, session = armed_session(tmp_path, project)
    session.say("armed")
    blocks(session.stop(clock))
    blocks(session.stop(clock, active=True))
    assert clock.slept >= 2
    assert kinds_of(run_id, "iteration_end") == [("iteration_end", 1)]
    assert state_of(run_id)["terminated"] is False


def test_a_corrupt_state_file_lets_the_stop_through_and_is_kept(
    tmp_path: Path, project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    clock = FakeClock()
    run_id = arm(project, clock, session=SESSION)
    state_file = runs_root() / run_id / "state.json"
    state_file.write_text("{torn")
    session = Session(tmp_path, project)
    assert session.stop(clock, last="ok") == ""
    err = capsys.readouterr().err
    assert err.startswith(f"autopilot: run {run_id}: ") and len(err.splitlines()) == 1
    assert state_file.read_text() == "{torn"
    assert entry_path(runs_root(), run_id).exists()


def test_an_interrupt_in_the_transcript_lets_the_session_stop(
    tmp_path: Path, project: Path
) -> None:
    clock, run_id, session = armed_session(tmp_path, project)
    session.say("partial")
    session.prompt("[Request interrupted by user]")
    assert "interrupted" in json.loads(session.stop(clock))["systemMessage"]
    assert kinds_of(run_id, "iteration_start") == []


def test_the_iteration_budget_ends_the_run(tmp_path: Path, project: Path) -> None:
    clock, run_id, session = armed_session(tmp_path, project, **{"max-iterations": "1"})
    blocks(session.stop(clock, last="ok"))
    ended = json.loads(session.stop(clock, active=True, last="still going"))
    assert "max_iterations" in ended["systemMessage"]
    assert state_of(run_id)["terminationReason"] == "max_iterations"


def test_a_second_arming_is_refused(project: Path) -> None:
    clock = FakeClock()
    first = arm(project, clock)
    with pytest.raises(UsageError, match=first):
        arm(project, clock)
    owned = arm(project, clock, session="s1")
    with pytest.raises(UsageError, match=owned):
        arm(project, clock, session="s1")


def test_the_session_comes_from_the_clis_shell_environment() -> None:
    assert session_from_env({"CLAUDE_CODE_SESSION_ID": "c1"}) == (HookAgent.CLAUDE, "c1")
    assert session_from_env({"CODEX_THREAD_ID": "x1"}) == (HookAgent.CODEX, "x1")
    assert session_from_env({"CLAUDE_CODE_SESSION_ID": " "}) is None
    assert session_from_env({}) is None


def test_a_run_stopped_elsewhere_leaves_the_registry_at_the_next_stop_of_any_session(
    tmp_path: Path, project: Path
) -> None:
    clock = FakeClock()
    run_id = arm(project, clock, session="owner")
    state_file = runs_root() / run_id / "state.json"
    state = json.loads(state_file.read_text())
    state_file.write_text(json.dumps({**state, "terminated": True, "status": "stopped"}))
    assert Session(tmp_path, project, "someone-else").stop(clock, last="hi") == ""
    assert not entry_path(runs_root(), run_id).exists()
    assert state_file.exists()


def test_a_message_sent_to_a_hook_run_goes_with_its_next_iteration(
    tmp_path: Path, project: Path
) -> None:
    clock = FakeClock()
    run_id = arm(project, clock, session=SESSION)
    sent = subprocess.run(
        [sys.executable, "-m", "autopilot", "send", run_id, "Use the new parser API."],
        cwd=project,
        capture_output=True,
        text=True,
        check=False,
    )
    assert sent.returncode == 0, sent.stderr
    assert "Stop hook" in sent.stdout
    assert not (runs_root() / run_id / "supervisor.log").exists()
    session = Session(tmp_path, project)
    prompt = blocks(session.stop(clock, last="ok"))
    assert prompt.startswith(PROMPT) and "Use the new parser API." in prompt
    delivered = [e for e in events_of(run_id) if e["type"] == "message_delivered"]
    assert [e["iteration"] for e in delivered] == [1]


def test_autopilot_stop_closes_the_open_iteration_once_and_the_next_stop_is_let_through(
    tmp_path: Path, project: Path
) -> None:
    clock, run_id, session = armed_session(tmp_path, project)
    session.say("armed")
    blocks(session.stop(clock, last="armed"))
    session.say("half way")  # the session is still in its turn
    clock.advance(30)
    result = stop(runs_root() / run_id, clock)
    assert result.message == (
        f"{run_id}: stopped (iteration 1 closed); its session's next stop is let through"
    )
    ends = [e for e in events_of(run_id) if e["type"] == "iteration_end"]
    assert [(e["iteration"], e["endedBy"]) for e in ends] == [(1, "stopped")]
    assert ends[0]["iterationTokens"] == {"input": 100, "output": 10}
    assert ends[0]["durationMs"] == 30_000
    assert [e["reason"] for e in events_of(run_id) if e["type"] == "abort"] == ["user_stopped"]
    state = state_of(run_id)
    assert (state["status"], state["iterationOpen"]) == ("stopped", False)
    assert state["spend"]["iterations"] == 1
    assert not entry_path(runs_root(), run_id).exists()
    assert session.stop(clock, active=True, last="half way") == ""
    assert kinds_of(run_id, "iteration_end", "abort", "iteration_start") == [
        ("iteration_start", 1),
        ("iteration_end", 1),
        ("abort", 1),
    ]
    with pytest.raises(UsageError, match="already ended"):
        stop(runs_root() / run_id, clock)


def test_autopilot_stop_before_the_first_stop_ends_the_run_without_an_iteration(
    project: Path,
) -> None:
    clock = FakeClock()
    run_id = arm(project, clock, session=SESSION)
    stop(runs_root() / run_id, clock)
    assert kinds_of(run_id, "iteration_start", "iteration_end", "abort") == [("abort", 0)]
    assert not entry_path(runs_root(), run_id).exists()


def test_a_stop_while_a_stop_is_answered_is_requested_and_closed_by_the_hook(
    tmp_path: Path, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(hook_control, "LOCK_WAIT_SECONDS", 0.05)
    clock, run_id, session = armed_session(tmp_path, project)
    blocks(session.stop(clock, last="armed"))
    with locked(runs_root()):  # a Stop of the session holds the registry
        result = stop(runs_root() / run_id, clock)
    assert "stop requested" in result.message
    assert kinds_of(run_id, "iteration_end", "abort") == []
    assert "ended: stopped by the user" in session.stop(clock, active=True, last="more")
    assert kinds_of(run_id, "iteration_end", "abort") == [("iteration_end", 1), ("abort", 1)]


def test_a_cost_the_transcript_records_binds_the_cost_budget(tmp_path: Path, project: Path) -> None:
    clock, run_id, session = armed_session(
        tmp_path, project, **{"max-cost": "0.05", "max-iterations": "0"}
    )
    session.say("armed", cost_usd=0.5)  # before the run: not charged
    blocks(session.stop(clock, last="armed"))
    session.say("part one", cost_usd=0.03)
    blocks(session.stop(clock, active=True, last="part one"))
    assert state_of(run_id)["spend"]["costUsd"] == 0.03
    session.say("part two", cost_usd=0.03)
    ended = json.loads(session.stop(clock, active=True, last="part two"))
    assert ended["systemMessage"] == f"autopilot: run {run_id} ended: budget reached (max_cost)"
    ends = [e for e in events_of(run_id) if e["type"] == "iteration_end"]
    assert [e["iterationCostUsd"] for e in ends] == [0.03, 0.03]
    assert state_of(run_id)["terminationReason"] == "max_cost"


def test_tokens_and_duration_budgets_end_a_hook_run(tmp_path: Path, project: Path) -> None:
    clock = FakeClock()
    by_tokens = arm(project, clock, session="s1", **{"max-tokens": "200", "max-iterations": "0"})
    session = Session(tmp_path, project, "s1")
    blocks(session.stop(clock, last="armed"))
    session.say("one")
    blocks(session.stop(clock, active=True, last="one"))
    session.say("two")
    assert "ended: budget reached (max_tokens)" in session.stop(clock, active=True, last="two")
    assert state_of(by_tokens)["spend"]["tokens"] == {"input": 200, "output": 20}
    by_time = arm(project, clock, session="s2", **{"max-duration": "1m", "max-iterations": "0"})
    other = Session(tmp_path, project, "s2")
    blocks(other.stop(clock, last="armed"))
    clock.advance(40)
    blocks(other.stop(clock, active=True, last="one"))
    clock.advance(40)
    assert "ended: budget reached (max_duration)" in other.stop(clock, active=True, last="two")
    assert state_of(by_time)["spend"]["activeMs"] == 80_000


def _status(run_id: str, project: Path) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "autopilot", "status", run_id],
        cwd=project,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def _hook_process(session: Session, *, active: bool, last: str) -> str:
    """One Stop answered by ``autopilot hook claude-stop`` run from this (non-shell)
    process, as Claude Code runs it."""
    done = subprocess.run(
        [sys.executable, "-m", "autopilot", "hook", "claude-stop"],
        cwd=session.project,
        input=session.stop_input(active=active, last=last).decode(),
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0 and not done.stderr, done.stderr
    return done.stdout


def test_status_shows_what_a_hook_run_is(tmp_path: Path, project: Path) -> None:
    clock = SystemClock()
    config = build_config({"agent": "claude", "max-cost": "5"}, project=project)
    run_id = arm_hook_run(
        runs_root(), config, PromptSource(text=PROMPT), project, HookAgent.CLAUDE, None, clock
    ).run_id
    before = _status(run_id, project)
    assert "driver" not in before
    assert f"mode       hook: the first claude session that stops in {project} until" in before
    assert "last stop  none yet" in before
    assert "session    waiting for the next Stop" in before
    warned = [e["note"] for e in events_of(run_id) if e["type"] == "warning"]
    assert any("--max-cost binds only where the session's transcript records" in n for n in warned)
    session = Session(tmp_path, project)
    session.say("armed")
    blocks(_hook_process(session, active=False, last="armed"))
    session.say("half")
    blocks(_hook_process(session, active=True, last="half"))
    during = _status(run_id, project)
    assert f"mode       hook: claude session {SESSION}" in during
    assert "last stop  " in during and "none yet" not in during
    # The hook's parent (this test's process) stands for the session's CLI.
    assert f"session    alive (pid {os.getpid()})" in during
    assert (
        "cost       unknown: the session's transcript records no cost (--max-cost $5 cannot bind)"
    ) in during
    as_json = json.loads(
        subprocess.run(
            [sys.executable, "-m", "autopilot", "status", "--json", run_id],
            cwd=project,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )
    assert as_json["hook"]["sessionId"] == SESSION and as_json["hook"]["cliAlive"] is True
    assert as_json["hook"]["costKnown"] is False
    stop(runs_root() / run_id, FakeClock())
    after = _status(run_id, project)
    assert f"mode       hook: claude session {SESSION} (no longer armed)" in after


def test_status_says_when_the_sessions_cli_is_gone(tmp_path: Path, project: Path) -> None:
    clock = FakeClock()
    run_id = arm(project, clock, session=SESSION)
    (armed,) = load_armings(runs_root())[0]
    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        text=True,
        capture_output=True,
        check=True,
    )
    pid = int(gone.stdout)
    with locked(runs_root()):
        write_arming(
            runs_root(),
            replace(armed, cli=CliProcess(pid, 1.0, "claude"), last_stop_at_ms=clock.ms),
        )
    assert f"session    gone (pid {pid}): its next Stop never comes; autopilot stop {run_id}" in (
        _status(run_id, project)
    )


def test_a_hook_iteration_counts_progress_as_the_driver_does(tmp_path: Path, project: Path) -> None:
    """Checking out a branch that already existed is no progress; a commit on it is."""
    for args in (
        ["checkout", "-q", "-b", "other"],
        ["commit", "-q", "--allow-empty", "-m", "a branch of the user's"],
        ["checkout", "-q", "-"],
    ):
        subprocess.run(["git", *args], cwd=project, check=True)
    clock = FakeClock()
    run_id = arm(project, clock, **{"max-iterations": "5"})
    session = Session(tmp_path, project)
    session.prompt("/autopilot")
    session.say("armed")
    blocks(session.stop(clock, last="armed"))
    subprocess.run(["git", "checkout", "-q", "other"], cwd=project, check=True)
    session.say("looked around")
    blocks(session.stop(clock, active=True, last="looked around"))
    subprocess.run(
        ["git", "commit", "-q", "--allow-empty", "-m", "work on other"], cwd=project, check=True
    )
    session.say("committed")
    blocks(session.stop(clock, active=True, last="committed"))
    ends = [e for e in events_of(run_id) if e["type"] == "iteration_end"]
    assert [(e["iteration"], e["progress"]) for e in ends] == [(1, "none"), (2, "made")]


def _replay_summary(run_id: str, project: Path) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "autopilot", "replay", run_id],
        cwd=project,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.splitlines()[-1]


def test_replay_shows_the_cost_a_hook_run_recorded(tmp_path: Path, project: Path) -> None:
    clock, unknown, session = armed_session(tmp_path, project)
    session.say("armed")
    blocks(session.stop(clock, last="armed"))
    session.say("work")
    blocks(session.stop(clock, active=True, last="work"))
    assert _replay_summary(unknown, project).endswith(
        "tokens 100/10, cost unknown (the session's transcript records no cost)"
    )
    stop(runs_root() / unknown, clock)
    clock, costed, session = armed_session(tmp_path, project, "s2")
    session.say("armed", cost_usd=0.5)
    blocks(session.stop(clock, last="armed"))
    session.say("work", cost_usd=0.25)
    blocks(session.stop(clock, active=True, last="work"))
    assert _replay_summary(costed, project).endswith("cost $0.2500")
