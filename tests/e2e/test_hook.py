"""The real Claude Code (2.1.197) and Codex (0.171.0) sessions continued by autopilot's
Stop hook, offline against the scripted model server: one body per scenario, one row
per CLI (``clis.HOOK_CLIS``).

* a prompt run continues the session until the promise;
* ``autopilot stop`` from another process ends the session at its next stop;
* a two-item backlog is worked through in one session;
* the ``/autopilot`` slash command arms the session it is typed in (Claude Code).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.e2e.clis import HOOK_CLIS, HookCli
from tests.e2e.conftest import cli_path
from tests.e2e.hook_session import HookSession

PROMPT = "Make sure hello.txt exists. When it does, say COMPLETE."

HOOK_CLI = pytest.mark.parametrize("cli", list(HOOK_CLIS.values()), ids=list(HOOK_CLIS))


def _session(tmp_path: Path, repo: Path, cli: HookCli) -> HookSession:
    session = HookSession(tmp_path, repo, cli.name)
    installed = session.autopilot("hook", "install", "--agent", cli.name)
    assert installed.returncode == 0, installed.stderr
    return session


def _start(
    session: HookSession, cli: HookCli, script: str, prompt: str = "start"
) -> subprocess.CompletedProcess[str]:
    argv = [str(cli_path(cli.name)), *cli.argv(prompt)]
    done = session.run_cli(script, argv, cli.setup(session.tmp_path))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done


def _terminal(events: list[dict[str, object]]) -> list[tuple[object, object]]:
    return [(e["type"], e["reason"]) for e in events if e["type"] in ("complete", "abort")]


@HOOK_CLI
def test_prompt_mode_continues_the_session_until_the_promise(
    cli: HookCli, tmp_path: Path, e2e_repo: Path
) -> None:
    session = _session(tmp_path, e2e_repo, cli)
    armed = session.autopilot("arm", "--agent", cli.name, "-p", PROMPT, "--max-iterations", "5")
    assert armed.returncode == 0, armed.stderr
    assert f"the first {cli.name} session that stops in" in armed.stdout
    _start(session, cli, "check-then-write")
    (run_dir,) = session.run_dirs()
    events = session.events(run_dir)
    assert events[0]["type"] == "armed"
    claimed = [e for e in events if e["type"] == "hook_session"]
    assert [(e["how"], e["agent"]) for e in claimed] == [("claimed", cli.name)]
    assert claimed[0]["sessionId"]
    assert [e["iteration"] for e in events if e["type"] == "iteration_start"] == [1]
    ends = [e for e in events if e["type"] == "iteration_end"]
    assert [e["iteration"] for e in ends] == [1] and ends[0]["tokens"]["input"] > 0
    assert _terminal(events) == [("complete", "completion_promise")]
    state = session.state(run_dir)
    assert (state["terminated"], state["status"], state["mode"]) == (True, "completed", "hook")
    assert (run_dir / "iter-0001" / "prompt.md").read_text().startswith(PROMPT)
    assert session.armed_entries() == []
    assert (e2e_repo / "hello.txt").read_text() == "hello from the fake model\n"


@HOOK_CLI
def test_autopilot_stop_from_another_process_ends_the_session_at_its_next_stop(
    cli: HookCli, tmp_path: Path, e2e_repo: Path
) -> None:
    session = _session(tmp_path, e2e_repo, cli)
    armed = session.autopilot(
        "arm", "--agent", cli.name, "-p", "Keep working on the parser.", "--max-iterations", "0"
    )
    assert armed.returncode == 0, armed.stderr
    done = _start(session, cli, "stop-self")
    (run_dir,) = session.run_dirs()
    events = session.events(run_dir)
    assert [e["iteration"] for e in events if e["type"] == "iteration_start"] == [1]
    assert _terminal(events) == [("abort", "user_stopped")]
    # The iteration the session was in when autopilot stop ran is closed, once.
    ends = [(e["iteration"], e["endedBy"]) for e in events if e["type"] == "iteration_end"]
    assert ends == [(1, "stopped")]
    assert session.state(run_dir)["status"] == "stopped"
    assert session.armed_entries() == []
    # The session ended at the stop after autopilot stop: its last answer is the agent's.
    assert done.stdout.count(cli.answer("still working on it")) == 1


@HOOK_CLI
def test_a_two_item_backlog_is_worked_through_in_one_session(
    cli: HookCli, tmp_path: Path, e2e_repo: Path
) -> None:
    session = _session(tmp_path, e2e_repo, cli)
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
    armed = session.autopilot("arm", "--agent", cli.name, "--backlog", "--max-iterations", "5")
    assert armed.returncode == 0, armed.stderr
    done = _start(session, cli, "backlog-two")
    (run_dir,) = session.run_dirs()
    events = session.events(run_dir)
    assert [e["iteration"] for e in events if e["type"] == "iteration_start"] == [1, 2]
    ended = [e for e in events if e["type"] == "workitem_end"]
    assert [(e["itemId"], e["status"]) for e in ended] == [
        ("item-1", "completed"),
        ("item-2", "completed"),
    ]
    assert _terminal(events) == [("complete", "backlog_done")]
    assert (e2e_repo / "one.txt").exists() and (e2e_repo / "two.txt").exists()
    assert session.armed_entries() == []
    assert cli.answer("item-2 done") in done.stdout


@pytest.mark.parametrize(
    "cli", [cli for cli in HOOK_CLIS.values() if cli.slash_command], ids=lambda cli: cli.name
)
def test_the_slash_command_arms_the_session_it_is_typed_in(
    cli: HookCli, tmp_path: Path, e2e_repo: Path
) -> None:
    session = _session(tmp_path, e2e_repo, cli)
    done = _start(session, cli, "check-then-write", f"/autopilot -p '{PROMPT}' --max-iterations 4")
    (run_dir,) = session.run_dirs()
    events = session.events(run_dir)
    armed = [e for e in events if e["type"] == "hook_session"]
    assert [e["how"] for e in armed] == ["armed"]
    assert f'"session_id":"{armed[0]["sessionId"]}"' in done.stdout
    assert _terminal(events) == [("complete", "completion_promise")]
    assert (e2e_repo / ".autopilot" / "memory.md").exists()
