"""``autopilot run`` in a real terminal (a pty): the live view drives the run."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

from tests.conftest import FakeAgent, read_jsonl


def _run_in_pty(
    args: list[str], cwd: Path, env: dict[str, str], timeout: float = 60
) -> tuple[int, str]:
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "autopilot", *args],
        cwd=cwd,
        env=dict(os.environ, TERM="xterm-256color", COLUMNS="120", LINES="40", **env),
        stdin=slave,
        stdout=slave,
        stderr=slave,
        start_new_session=True,
    )
    os.close(slave)
    output = bytearray()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                break
            if not chunk:
                break
            output += chunk
        elif proc.poll() is not None:
            break
    code = proc.wait(timeout=10)
    os.close(master)
    return code, output.decode("utf-8", "replace")


def test_run_in_a_terminal_shows_the_live_view_and_completes(
    tmp_path: Path, repo: Path, fake_agent: FakeAgent
) -> None:
    env = fake_agent(
        [
            [{"write_file": "a.txt", "content": "a"}, {"sleep": 1}, {"result": "wrote a.txt"}],
            [{"result": "COMPLETE"}],
        ]
    )
    code, screen = _run_in_pty(["run", "-p", "x", "--max-iterations", "4"], repo, env)
    assert code == 0, screen[-2000:]
    assert "\x1b[?1049h" in screen  # the alternate screen of the live view
    assert "completed (completion_promise)" in screen
    runs = [p for p in (tmp_path / "runs").iterdir() if p.name.startswith("repo-")]
    assert len(runs) == 1
    terminal = [
        e for e in read_jsonl(runs[0] / "events.jsonl") if e["type"] in ("complete", "abort")
    ]
    assert [(e["type"], e["reason"]) for e in terminal] == [("complete", "completion_promise")]
