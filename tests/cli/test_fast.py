"""The everyday commands' fast path (``cli.fast``) prints and exits exactly as the
command line does, on the same inputs, bad ones included; what it does not take goes
to the command line."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from autopilot.cli.fast import fast_command
from tests.manage.runs import dead_driver, make_run, now_ms

_ENTRY = """
import json, os, sys
sys.argv = ["autopilot", *sys.argv[1:]]
if os.environ.get("FAST_TEST_STATUS_RAISES"):  # what status's body meets
    from autopilot.cli import control_body

    def status(*args):
        raise getattr(__builtins__, os.environ["FAST_TEST_STATUS_RAISES"])()

    control_body.status = status
from autopilot.{module} import main
try:
    main()
except SystemExit as done:
    code = done.code
print(json.dumps({{"code": code, "click": "click" in sys.modules}}), file=sys.stderr)
"""


def _run(
    module: str,
    args: list[str],
    cwd: Path,
    runs: Path,
    encoding: str = "utf-8",
    raises: str = "",
) -> tuple[int, str, str, bool]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AUTOPILOT_")}
    env.update(
        AUTOPILOT_RUNS_DIR=str(runs), PYTHONIOENCODING=encoding, FAST_TEST_STATUS_RAISES=raises
    )
    done = subprocess.run(
        [sys.executable, "-c", _ENTRY.format(module=module), *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        encoding="utf-8",
        stdin=subprocess.DEVNULL,
        check=False,
        timeout=120,
    )
    *err, report_line = done.stderr.splitlines()
    report = json.loads(report_line)
    return report["code"] or 0, done.stdout, "\n".join(err), report["click"]


def _normalized(text: str) -> str:
    """Without what differs between two runs of one command: the moment it ran."""
    text = re.sub(r"^elapsed .*$", "elapsed …", text, flags=re.M)
    return re.sub(r"message \S+ queued", "message … queued", text)


@pytest.fixture
def world(tmp_path: Path) -> tuple[Path, Path, str, str]:
    """A runs root with an ended run and one whose driver is gone, both of a project."""
    runs = tmp_path / "runs"
    project = tmp_path / "project"
    project.mkdir()
    started = now_ms() - 3_600_000
    ended = make_run(
        runs, "old", started, terminal=("complete", "completion_promise"), iterations=2
    )
    gone = make_run(
        runs,
        "project",
        started + 1000,
        iterations=3,
        state={**dead_driver(), "cwd": str(project.resolve())},
    )
    return runs, project, ended, gone


_READING = [
    ["--version"],
    ["status"],
    ["status", "--json"],
    ["status", "{ended}"],
    ["status", "{ended}", "--json"],
    ["status", "no-such-run"],
    ["status", "a", "b"],
    ["status", "--bogus"],
    ["status", "-h"],
    ["list"],
    ["list", "--json"],
    ["list", "--limit", "1"],
    ["list", "--limit", "x"],
    ["list", "--limit"],
    ["list", "--limit", "-5"],
    ["status", "-"],
    ["list", "extra"],
    ["stats"],
    ["stats", "--json"],
    ["stats", "x"],
    ["pause", "{ended}"],
    ["stop", "{ended}"],
    ["send"],
    ["send", "--file"],
    ["--version", "extra"],
]

_CHANGING = [
    ["pause"],
    ["resume"],
    ["stop"],
    ["stop", "--now", "{gone}"],
    ["send", "a note for the agent", "--no-start"],
    ["send", "{gone}", "-", "--no-start"],
    ["send", "{ended}", "late"],
]


def _args(template: list[str], ended: str, gone: str) -> list[str]:
    return [arg.format(ended=ended, gone=gone) for arg in template]


@pytest.mark.parametrize("template", _READING, ids=" ".join)
def test_reading_commands_match_the_command_line(
    world: tuple[Path, Path, str, str], template: list[str]
) -> None:
    runs, project, ended, gone = world
    args = _args(template, ended, gone)
    fast = _run("launch", args, project, runs)
    slow = _run("cli.main", args, project, runs)
    assert (fast[0], _normalized(fast[1]), fast[2]) == (slow[0], _normalized(slow[1]), slow[2])
    assert slow[3], "the command line path loads click"
    assert fast[3] is (fast_command(args) is None)


@pytest.mark.parametrize("template", _CHANGING, ids=" ".join)
def test_changing_commands_match_the_command_line(
    tmp_path: Path, world: tuple[Path, Path, str, str], template: list[str]
) -> None:
    runs, project, ended, gone = world
    args = _args(template, ended, gone)
    twin = tmp_path / "twin-runs"
    shutil.copytree(runs, twin)
    fast = _run("launch", args, project, runs)
    slow = _run("cli.main", args, project, twin)
    assert (fast[0], _normalized(fast[1]), fast[2]) == (slow[0], _normalized(slow[1]), slow[2])
    assert not fast[3], "taken by the fast path"
    for run_id in (ended, gone):
        mine = json.loads((runs / run_id / "state.json").read_text())
        theirs = json.loads((twin / run_id / "state.json").read_text())
        for moment in ("updatedAt", "pausedAt", "stopRequestedAt", "endedAt"):
            mine.pop(moment, None)
            theirs.pop(moment, None)
        assert mine == theirs


@pytest.mark.parametrize("error", ["KeyboardInterrupt", "EOFError", "RuntimeError"])
def test_an_interrupted_command_ends_as_the_command_lines(
    world: tuple[Path, Path, str, str], error: str
) -> None:
    runs, project, ended, _ = world
    fast = _run("launch", ["status", ended], project, runs, raises=error)
    slow = _run("cli.main", ["status", ended], project, runs, raises=error)
    assert fast[:3] == slow[:3]
    assert not fast[3], "taken by the fast path"
    if error != "RuntimeError":
        assert fast[:3] == (130, "", "\nautopilot: interrupted")


@pytest.mark.parametrize("encoding", ["ascii", "latin-1"])
def test_a_stream_that_is_not_utf8_still_gets_the_whole_status(
    world: tuple[Path, Path, str, str], encoding: str
) -> None:
    """Such a stream goes to the command line, which writes what the stream's own
    encoding cannot hold as UTF-8 (as click does for an ASCII one), not an error."""
    runs, project, _, gone = world
    code, stdout, stderr, loaded_click = _run("launch", ["status", gone], project, runs, encoding)
    assert (code, stderr) == (0, "")
    assert " — relaunch: autopilot start " + gone in stdout
    assert loaded_click, "the fast path takes UTF-8 streams only"
    fast = _run("launch", ["status", gone], project, runs)
    assert _normalized(stdout) == _normalized(fast[1])


def test_what_click_must_parse_goes_to_it() -> None:
    for args in (
        [],
        ["run", "-p", "x"],
        ["status", "--help"],
        ["status", "--json", "--json"],
        ["status", "--", "run"],
        ["status", "--json=1"],
        ["list", "--limit", "1", "--limit", "2"],
        ["stop", "-x"],
        ["send", "--file", "notes.txt"],
        ["send", "-", "-n"],
        ["watch"],
    ):
        assert fast_command(args) is None, args
    for args in (
        ["--version"],
        ["status", "-"],
        ["list", "--limit", "-5"],
        ["send", "run", "text", "--no-start"],
    ):
        assert fast_command(args) is not None, args
