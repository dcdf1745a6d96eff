"""``autopilot tasks`` on a full disk, made real with ``RLIMIT_FSIZE`` (the kernel then
writes what fits of the new tasks.jsonl and refuses the rest, as on a full disk): one
line, exit 4, and the file as it was."""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
from pathlib import Path

import pytest

TASKS = Path(".autopilot/tasks.jsonl")


def _autopilot(
    cwd: Path, *args: str, room_bytes: int | None = None
) -> subprocess.CompletedProcess[str]:
    """``autopilot ARGS`` in ``cwd``; with ``room_bytes``, no file it writes may grow
    past the current tasks.jsonl's size plus that much."""
    limit = None if room_bytes is None else (cwd / TASKS).stat().st_size + room_bytes

    def full_disk() -> None:
        if limit is not None:
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a refused write, not a kill
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))

    return subprocess.run(
        [sys.executable, "-m", "autopilot", *args],
        cwd=cwd,
        env=dict(os.environ, PYTHONDONTWRITEBYTECODE="1"),
        preexec_fn=full_disk,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.fixture
def project(tmp_path: Path) -> Path:
    path = tmp_path / "project"
    path.mkdir()
    done = _autopilot(path, "tasks", "add", "write the overview", "--id", "a")
    assert done.returncode == 0, done.stderr
    (path / "checklist.md").write_text("- [ ] describe the config file in full\n")
    return path


@pytest.mark.parametrize(
    "args",
    [
        ["tasks", "add", "describe the config file in full", "--id", "b"],
        ["tasks", "edit", "a", "--prompt", "write the overview, with an example of each"],
        ["tasks", "block", "a", "--reason", "waiting for the API key to arrive"],
        ["tasks", "import", "checklist.md"],
    ],
    ids=["add", "edit", "block", "import"],
)
def test_a_tasks_write_on_a_full_disk_is_one_line_exit_4_and_loses_nothing(
    project: Path, args: list[str]
) -> None:
    before = (project / TASKS).read_bytes()
    done = _autopilot(project, *args, room_bytes=8)
    assert done.returncode == 4, done.stderr
    assert done.stderr == (f"autopilot: error: cannot write {project / TASKS}: File too large\n")
    assert (project / TASKS).read_bytes() == before
    assert sorted(p.name for p in (project / ".autopilot").iterdir()) == ["tasks.jsonl"]
    # Once there is room, the same command works.
    again = _autopilot(project, *args)
    assert again.returncode == 0, again.stderr
    after = [json.loads(line) for line in (project / TASKS).read_text().splitlines()]
    assert after[0]["id"] == "a" and (project / TASKS).read_bytes() != before
