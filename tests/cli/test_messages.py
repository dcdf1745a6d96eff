"""``autopilot send``, ``off``/``on`` and ``memory`` from the command line."""

from __future__ import annotations

import os
from pathlib import Path

from autopilot.config import RunConfig
from autopilot.loop.arming import arm_run
from autopilot.loop.clock import SystemClock
from autopilot.store.inbox import Inbox
from autopilot.store.memory import ensure_memory, keep_copy
from autopilot.store.paths import runs_root
from autopilot.store.run_state import PromptSource
from tests.cli.test_control import _terminals, _wait_for
from tests.conftest import FakeAgent, read_jsonl, run_cli


def _arm(repo: Path) -> Path:
    root = runs_root()
    return root / arm_run(root, RunConfig(), PromptSource(text="work"), repo, SystemClock())


def test_send_queues_a_message_for_a_run_with_no_driver(repo: Path) -> None:
    folder = _arm(repo)
    done = run_cli(["send", "please also update the docs"], cwd=repo)
    assert done.returncode == 0, done.stderr
    assert "queued for" in done.stdout and "no daemon is running" in done.stdout
    [message] = Inbox(folder).pending()
    assert message.text == "please also update the docs"
    (repo / "note.md").write_text("from a file\n")
    done = run_cli(["send", folder.name[:8], "--file", "note.md", "--no-start"], cwd=repo)
    assert done.returncode == 0, done.stderr
    assert [m.text for m in Inbox(folder).pending()] == [
        "please also update the docs",
        "from a file\n",
    ]
    queued = [e for e in read_jsonl(folder / "events.jsonl") if e["type"] == "message_queued"]
    assert len(queued) == 2


def test_send_usage_errors_are_one_line_with_exit_2(repo: Path) -> None:
    folder = _arm(repo)
    for args in (
        ["send"],
        ["send", "a", "b", "c"],
        ["send", "   "],
        ["send", "--file", "missing.txt"],
        ["send", folder.name, "x", "--file", "y"],
        ["send", "nosuchrun", "text"],
        ["send", os.fsdecode(b"fix \xff it")],  # not UTF-8: it could not reach the agent
    ):
        done = run_cli(args, cwd=repo)
        assert done.returncode == 2, (args, done.stdout, done.stderr)
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr
        assert "Traceback" not in done.stderr
    assert Inbox(folder).pending() == ()


def test_send_of_an_endless_or_huge_file_is_refused_without_reading_it_all(repo: Path) -> None:
    folder = _arm(repo)
    (repo / "big.txt").write_text("x" * 100_001)
    (repo / "max.txt").write_text("y" * 100_000)
    for name in ("/dev/zero", "big.txt"):
        done = run_cli(["send", "--file", name, "--no-start"], cwd=repo, timeout=60)
        assert done.returncode == 2, done.stderr
        assert done.stderr.strip() == (
            f"autopilot: error: {name} is longer than 100000 characters, the most a message may be"
        )
    assert Inbox(folder).pending() == ()
    done = run_cli(["send", "--file", "max.txt", "--no-start"], cwd=repo)
    assert done.returncode == 0, done.stderr
    assert [len(m.text) for m in Inbox(folder).pending()] == [100_000]


def test_off_and_on_toggle_the_project_switch(repo: Path) -> None:
    done = run_cli(["off"], cwd=repo)
    assert done.returncode == 0 and (repo / ".autopilot" / "OFF").is_file()
    assert "already OFF" in run_cli(["off"], cwd=repo).stdout
    done = run_cli(["on"], cwd=repo)
    assert done.returncode == 0 and not (repo / ".autopilot" / "OFF").exists()
    assert "already ON" in run_cli(["on"], cwd=repo).stdout


def test_memory_prints_the_project_file_or_the_run_copy(repo: Path) -> None:
    assert "no memory file yet" in run_cli(["memory"], cwd=repo).stdout
    folder = _arm(repo)
    assert ensure_memory(repo) is True
    (repo / ".autopilot" / "memory.md").write_text("- the API lives in src/api.py\n")
    assert run_cli(["memory"], cwd=repo).stdout == "- the API lives in src/api.py\n"
    keep_copy(repo, folder)
    (repo / ".autopilot" / "memory.md").unlink()
    done = run_cli(["memory", folder.name], cwd=repo)
    assert done.stdout == "- the API lives in src/api.py\n"
    assert str(folder / "memory.md") in done.stderr


def test_send_relaunches_a_run_whose_daemon_is_dead_unless_off(
    repo: Path, fake_agent: FakeAgent
) -> None:
    env = fake_agent([[{"echo_prompt": True}, {"result": "COMPLETE"}]])
    folder = _arm(repo)
    (repo / ".autopilot").mkdir()
    (repo / ".autopilot" / "OFF").write_text("")
    held = run_cli(["send", "first"], cwd=repo, env=env)
    assert "autopilot is OFF" in held.stdout and "relaunching" not in held.stdout
    (repo / ".autopilot" / "OFF").unlink()
    done = run_cli(["send", "second"], cwd=repo, env=env)
    assert done.returncode == 0, done.stderr
    assert "relaunching it to read the message" in done.stdout
    _wait_for(lambda: _terminals(folder) != [], 90)
    assert _terminals(folder) == [("complete", "completion_promise")]
    prompt = (folder / "iter-0001" / "prompt.md").read_text()
    assert prompt.index("first") < prompt.index("second")
