"""The real Codex CLI (0.171.0) continued by autopilot's Stop hook, offline.

Codex runs a hook only once it is trusted; ``codex exec --dangerously-bypass-hook-trust``
runs it anyway, and ``--trust`` lets it read the project's ``.codex/hooks.json``.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.e2e.clis import CODEX_CONFIG as CONFIG
from tests.e2e.conftest import cli_path
from tests.e2e.hook_session import HookSession

PROMPT = "Make sure hello.txt exists. When it does, say COMPLETE."


def _codex(session: HookSession, script: str) -> subprocess.CompletedProcess[str]:
    codex_home = session.tmp_path / "codex-home"
    codex_home.mkdir(exist_ok=True)
    template = session.tmp_path / "config.toml.template"
    template.write_text(CONFIG)
    return session.run_cli(
        script,
        [
            str(cli_path("codex")),
            "exec",
            "--json",
            "--dangerously-bypass-approvals-and-sandbox",
            "--skip-git-repo-check",
            "--trust",
            "--dangerously-bypass-hook-trust",
            "--",
            "start",
        ],
        {"CODEX_HOME": str(codex_home), "FAKE_API_KEY": "dummy"},
        templates={template: codex_home / "config.toml"},
    )


def test_prompt_mode_continues_the_session_until_the_promise(
    tmp_path: Path, e2e_repo: Path
) -> None:
    session = HookSession(tmp_path, e2e_repo, "codex")
    installed = session.autopilot("hook", "install", "--agent", "codex")
    assert installed.returncode == 0, installed.stderr
    armed = session.autopilot("arm", "--agent", "codex", "-p", PROMPT, "--max-iterations", "5")
    assert armed.returncode == 0, armed.stderr
    done = _codex(session, "check-then-write")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (run_dir,) = session.run_dirs()
    events = session.events(run_dir)
    claimed = [e for e in events if e["type"] == "hook_session"]
    assert len(claimed) == 1 and claimed[0]["agent"] == "codex" and claimed[0]["sessionId"]
    assert [e["iteration"] for e in events if e["type"] == "iteration_start"] == [1]
    terminal = [e for e in events if e["type"] in ("complete", "abort")]
    assert [(e["type"], e["reason"]) for e in terminal] == [("complete", "completion_promise")]
    ends = [e for e in events if e["type"] == "iteration_end"]
    assert len(ends) == 1 and ends[0]["tokens"]["input"] > 0
    assert session.armed_entries() == []
    assert "<promise>COMPLETE</promise>" in done.stdout


def test_autopilot_stop_from_another_process_ends_the_session_at_its_next_stop(
    tmp_path: Path, e2e_repo: Path
) -> None:
    session = HookSession(tmp_path, e2e_repo, "codex")
    assert session.autopilot("hook", "install", "--agent", "codex").returncode == 0
    armed = session.autopilot(
        "arm", "--agent", "codex", "-p", "Keep working on the parser.", "--max-iterations", "0"
    )
    assert armed.returncode == 0, armed.stderr
    done = _codex(session, "stop-self")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (run_dir,) = session.run_dirs()
    events = session.events(run_dir)
    terminal = [e for e in events if e["type"] in ("complete", "abort")]
    assert [(e["type"], e["reason"]) for e in terminal] == [("abort", "user_stopped")]
    # The iteration the session was in when autopilot stop ran is closed, once.
    ends = [(e["iteration"], e["endedBy"]) for e in events if e["type"] == "iteration_end"]
    assert ends == [(1, "stopped")]
    assert session.armed_entries() == []
    assert done.stdout.count('"still working on it"') == 1


def test_a_two_item_backlog_is_worked_through_in_one_session(
    tmp_path: Path, e2e_repo: Path
) -> None:
    session = HookSession(tmp_path, e2e_repo, "codex")
    assert session.autopilot("hook", "install", "--agent", "codex").returncode == 0
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
    armed = session.autopilot("arm", "--agent", "codex", "--backlog", "--max-iterations", "5")
    assert armed.returncode == 0, armed.stderr
    done = _codex(session, "backlog-two")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (run_dir,) = session.run_dirs()
    events = session.events(run_dir)
    assert [e["iteration"] for e in events if e["type"] == "iteration_start"] == [1, 2]
    ended = [e for e in events if e["type"] == "workitem_end"]
    assert [(e["itemId"], e["status"]) for e in ended] == [
        ("item-1", "completed"),
        ("item-2", "completed"),
    ]
    terminal = [e for e in events if e["type"] in ("complete", "abort")]
    assert [(e["type"], e["reason"]) for e in terminal] == [("complete", "backlog_done")]
    assert session.armed_entries() == []
