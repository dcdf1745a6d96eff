"""Run folders are 0700 and their files 0600, whatever the umask, also when something
deleted them; what autopilot writes holds no well-known secret, the raw output does."""

from __future__ import annotations

import json
import os
import shutil
import stat
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from autopilot.store.events import EventLog
from autopilot.store.run_state import decode_state
from autopilot.store.state import StateStore
from tests.conftest import FakeAgent
from tests.view.runfiles import base_state

SECRET = "sk-ant-api03-" + "Zq9_" * 20
GITHUB = "ghp_" + "a1B2" * 9


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


@pytest.fixture
def open_umask() -> Iterator[None]:
    """The most permissive umask: modes come from autopilot alone."""
    previous = os.umask(0)
    yield
    os.umask(previous)


def test_a_run_leaves_only_private_files_and_no_secret(
    tmp_path: Path, repo: Path, fake_agent: FakeAgent
) -> None:
    import subprocess

    failing = [
        {"text": f"I found {GITHUB} in .env"},
        {"result": f"Invalid API key · {SECRET}", "is_error": True},
    ]
    env = fake_agent([failing] * 3)  # three identical failures halt the run, quoting it
    command = f"umask 000; exec {sys.executable} -m autopilot run -p work --max-iterations 5"
    done = subprocess.run(
        ["sh", "-c", command],
        cwd=repo,
        env=dict(os.environ, **env),
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    root = tmp_path / "runs"
    (folder,) = (p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    modes = {
        str(path.relative_to(root)): _mode(path)
        for path in [*root.rglob("*")]
        if path.name != "runs"
    }
    assert modes, "nothing was written"
    wrong = {
        name: oct(mode)
        for name, mode in modes.items()
        if mode != (0o700 if (root / name).is_dir() else 0o600)
    }
    assert wrong == {}
    assert f"{folder.name}/iter-0001/stdout.log" in modes
    written = (folder / "events.jsonl").read_text() + (folder / "state.json").read_text()
    assert SECRET not in written and GITHUB not in written
    assert "sk-ant-[REDACTED]" in json.loads((folder / "state.json").read_text())["terminationNote"]
    assert SECRET not in done.stdout + done.stderr
    # The raw output keeps the agent's bytes.
    assert SECRET in (folder / "iter-0001" / "stdout.log").read_text()


def test_files_made_again_keep_private_modes(tmp_path: Path, open_umask: None) -> None:
    folder = tmp_path / "runs" / "demo-1796000000000"
    folder.parent.mkdir()
    folder.mkdir(mode=0o700)
    store = StateStore(folder / "state.json")
    state = store.create(decode_state(base_state()))
    assert _mode(folder / "state.json") == 0o600
    shutil.rmtree(folder)  # the whole run folder, deleted under a driver
    store.update(lambda s: setattr(s, "iteration", 2), fallback=state)
    assert _mode(folder) == 0o700
    assert _mode(folder / "state.json") == 0o600
    assert _mode(folder / "state.json.lock") == 0o600
    log = EventLog(folder / "events.jsonl", folder.name, lambda: 1)
    log.emit("warning", note="first")
    (folder / "events.jsonl").unlink()
    log.emit("warning", note=f"again, with {SECRET}")
    log.close()
    assert _mode(folder / "events.jsonl") == 0o600
    assert SECRET not in (folder / "events.jsonl").read_text()
