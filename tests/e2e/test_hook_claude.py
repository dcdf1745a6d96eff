"""The real Claude Code CLI (2.1.197) continued by autopilot's Stop hook, offline."""

from __future__ import annotations

from pathlib import Path

from tests.e2e.conftest import cli_path
from tests.e2e.hook_session import HookSession

PROMPT = "Make sure hello.txt exists. When it does, say COMPLETE."


def _claude(session: HookSession, script: str, prompt: str = "start"):  # type: ignore[no-untyped-def]
    return session.run_cli(
        script,
        [
            str(cli_path("claude")),
            "-p",
            prompt,
            "--output-format",
            "stream-json",
            "--verbose",
            "--dangerously-skip-permissions",
        ],
        {
            "ANTHROPIC_BASE_URL": "{base_url}",
            "ANTHROPIC_API_KEY": "dummy",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "CLAUDE_CODE_MAX_RETRIES": "0",
            "IS_SANDBOX": "1",
        },
    )


def test_prompt_mode_continues_the_session_until_the_promise(
    tmp_path: Path, e2e_repo: Path
) -> None:
    session = HookSession(tmp_path, e2e_repo, "claude")
    installed = session.autopilot("hook", "install")
    assert installed.returncode == 0, installed.stderr
    armed = session.autopilot("arm", "-p", PROMPT, "--max-iterations", "5")
    assert armed.returncode == 0, armed.stderr
    assert "the first claude session that stops in" in armed.stdout
    done = _claude(session, "check-then-write")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (run_dir,) = session.run_dirs()
    events = session.events(run_dir)
    kinds = [e["type"] for e in events]
    assert kinds[0] == "armed"
    claimed = [e for e in events if e["type"] == "hook_session"]
    assert len(claimed) == 1 and claimed[0]["how"] == "claimed" and claimed[0]["sessionId"]
    assert [e["iteration"] for e in events if e["type"] == "iteration_start"] == [1]
    ends = [e for e in events if e["type"] == "iteration_end"]
    assert [e["iteration"] for e in ends] == [1]
    terminal = [e for e in events if e["type"] in ("complete", "abort")]
    assert [(e["type"], e["reason"]) for e in terminal] == [("complete", "completion_promise")]
    state = session.state(run_dir)
    assert state["terminated"] is True and state["status"] == "completed"
    assert state["mode"] == "hook"
    assert (run_dir / "iter-0001" / "prompt.md").read_text().startswith(PROMPT)
    assert session.armed_entries() == []
    assert (e2e_repo / "hello.txt").read_text() == "hello from the fake model\n"


def test_autopilot_stop_from_another_process_ends_the_session_at_its_next_stop(
    tmp_path: Path, e2e_repo: Path
) -> None:
    session = HookSession(tmp_path, e2e_repo, "claude")
    assert session.autopilot("hook", "install").returncode == 0
    armed = session.autopilot("arm", "-p", "Keep working on the parser.", "--max-iterations", "0")
    assert armed.returncode == 0, armed.stderr
    done = _claude(session, "stop-self")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (run_dir,) = session.run_dirs()
    events = session.events(run_dir)
    assert [e["iteration"] for e in events if e["type"] == "iteration_start"] == [1]
    terminal = [e for e in events if e["type"] in ("complete", "abort")]
    assert [(e["type"], e["reason"]) for e in terminal] == [("abort", "user_stopped")]
    # The iteration the session was in when autopilot stop ran is closed, once.
    ends = [(e["iteration"], e["endedBy"]) for e in events if e["type"] == "iteration_end"]
    assert ends == [(1, "stopped")]
    assert session.state(run_dir)["status"] == "stopped"
    assert session.armed_entries() == []
    # The session ended at the stop after autopilot stop: its last answer is the agent's.
    assert '"result":"still working on it"' in done.stdout


def test_a_two_item_backlog_is_worked_through_in_one_session(
    tmp_path: Path, e2e_repo: Path
) -> None:
    session = HookSession(tmp_path, e2e_repo, "claude")
    assert session.autopilot("hook", "install").returncode == 0
    for item_id, name in (("item-1", "one.txt"), ("item-2", "two.txt")):
        added = session.autopilot(
            "tasks",
            "add",
            f"Write {name}",
            "--id",
            item_id,
            "--criterion",
            f"{name} exists :: test -f {name}",
        )
        assert added.returncode == 0, added.stderr
    armed = session.autopilot("arm", "--backlog", "--max-iterations", "5")
    assert armed.returncode == 0, armed.stderr
    done = _claude(session, "backlog-two")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (run_dir,) = session.run_dirs()
    events = session.events(run_dir)
    starts = [
        (e["type"], e.get("itemId"), e.get("iteration"))
        for e in events
        if e["type"] in ("iteration_start", "workitem_start", "workitem_end")
    ]
    assert [s for s in starts if s[0] == "iteration_start"] == [
        ("iteration_start", None, 1),
        ("iteration_start", None, 2),
    ]
    ended = [e for e in events if e["type"] == "workitem_end"]
    assert [(e["itemId"], e["status"]) for e in ended] == [
        ("item-1", "completed"),
        ("item-2", "completed"),
    ]
    terminal = [e for e in events if e["type"] in ("complete", "abort")]
    assert [(e["type"], e["reason"]) for e in terminal] == [("complete", "backlog_done")]
    assert (e2e_repo / "one.txt").exists() and (e2e_repo / "two.txt").exists()
    assert session.armed_entries() == []
    assert '"result":"item-2 done"' in done.stdout


def test_the_slash_command_arms_the_session_it_is_typed_in(tmp_path: Path, e2e_repo: Path) -> None:
    session = HookSession(tmp_path, e2e_repo, "claude")
    assert session.autopilot("hook", "install").returncode == 0
    done = _claude(session, "check-then-write", f"/autopilot -p '{PROMPT}' --max-iterations 4")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (run_dir,) = session.run_dirs()
    events = session.events(run_dir)
    armed = [e for e in events if e["type"] == "hook_session"]
    assert [e["how"] for e in armed] == ["armed"]
    assert f'"session_id":"{armed[0]["sessionId"]}"' in done.stdout
    terminal = [e for e in events if e["type"] in ("complete", "abort")]
    assert [(e["type"], e["reason"]) for e in terminal] == [("complete", "completion_promise")]
    assert (e2e_repo / ".autopilot" / "memory.md").exists()
