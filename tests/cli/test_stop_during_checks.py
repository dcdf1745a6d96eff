"""``autopilot stop --now`` while autopilot runs a work item's check or a verify
command that hangs: the run ends now, the check's processes with it, and the work
item stays running (a check that was stopped is no evidence either way)."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from tests.cli.test_control import _run_dir, _wait_for
from tests.conftest import FakeAgent, read_jsonl, run_cli

HANGING = "sleep 612"


def _hanging_left() -> list[psutil.Process]:
    return [
        p
        for p in psutil.process_iter(["cmdline"])
        if p.info["cmdline"] and " ".join(p.info["cmdline"]) == HANGING
    ]


@pytest.mark.parametrize("kind", ["backlog", "verify"])
def test_stop_now_ends_a_hanging_check(
    tmp_path: Path, repo: Path, fake_agent: FakeAgent, kind: str
) -> None:
    if kind == "backlog":
        item = {
            "id": "a",
            "prompt": "write a",
            "acceptance_criteria": [{"id": "ac1", "text": "a", "check": HANGING}],
        }
        (repo / ".autopilot").mkdir()
        (repo / ".autopilot" / "tasks.jsonl").write_text(json.dumps(item) + "\n")
        report = (
            f"{sys.executable} -m autopilot report continue_next --item a "
            "--criterion ac1=pass --evidence done"
        )
        env = fake_agent([[{"shell": report}, {"result": "ok"}]])
        args = ["--backlog"]
    else:
        env = fake_agent([[{"result": "COMPLETE"}]])
        args = ["-p", "work", "--verify", HANGING]
    proc = subprocess.Popen(
        [sys.executable, "-m", "autopilot", "run", *args, "--plain", "--max-iterations", "3"],
        cwd=repo,
        env={**os.environ, **env},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        folder = _run_dir(tmp_path)
        _wait_for(lambda: bool(_hanging_left()), 60)
        stop = run_cli(["stop", "--now", folder.name], cwd=repo)
        assert stop.returncode == 0, stop.stderr
        out, _ = proc.communicate(timeout=60)  # not the check's 600 s timeout
        assert proc.returncode == 130, out
        events = read_jsonl(folder / "events.jsonl")
        ends = [(e["type"], e["reason"]) for e in events if e["type"] in ("complete", "abort")]
        assert ends == [("abort", "user_stopped")]
        if kind == "backlog":
            tasks = read_jsonl(repo / ".autopilot" / "tasks.jsonl")
            assert [(t["id"], t["status"]) for t in tasks] == [("a", "running")]
            notes = [str(e.get("note")) for e in events if e["type"] == "warning"]
            assert "the checks of work item a were stopped; it stays running" in notes
        _wait_for(lambda: not _hanging_left(), 10)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()
        for process in _hanging_left():
            with contextlib.suppress(psutil.Error):
                process.kill()
