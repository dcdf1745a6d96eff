"""Commands import only what they need: no live view, driver, adapter, recovery code
or psutil for ``--version``, ``status``, ``list`` and the control commands (an import
check in a fresh interpreter, not a timing)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from autopilot.store.flock import FileLock
from tests.manage.runs import alive_driver, dead_driver, make_run, now_ms

_PROBE = """
import atexit, json, sys
sys.argv = ["autopilot", *sys.argv[1:]]
from autopilot.launch import main  # the console entry
try:
    main()
except SystemExit as done:
    code = done.code
report = {"code": code, "modules": sorted(sys.modules), "atexit": atexit._ncallbacks()}
print(json.dumps(report), file=sys.stderr)
"""

_NOT_FOR_STATUS = (
    "textual",
    "rich",
    "watchfiles",
    "psutil",
    "autopilot.view.tui",
    "autopilot.view.widgets",
    "autopilot.view.live",
    "autopilot.loop.driver",
    "autopilot.loop.process",
    "autopilot.loop.recovery",
    "autopilot.agents",
    "autopilot.runtime.daemon",
    "autopilot.runtime.supervisor",
    "autopilot.workspace",
    "autopilot.core.restart",
    "autopilot.store.backlog",
    "msgspec",  # a short log, and the index and finished.json of any size, are read with json
    "autopilot.store.records",
)

_NOT_FOR_CONTROL = (
    "autopilot.store.lanes",  # only for a parallel run
    "autopilot.store.snapshot",  # only for status
    "autopilot.store.events",  # only where an event is written
    "autopilot.view.present",
    "autopilot.view.plain",
    "autopilot.core.ending",
    "autopilot.core.adaptive",
)
"""What ``pause``, ``resume`` and ``stop`` of a run that is not parallel leave alone."""


def _imported(args: list[str], cwd: Path, runs: Path) -> set[str]:
    return set(_probe(args, cwd, runs)["modules"])


def _probe(args: list[str], cwd: Path, runs: Path) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AUTOPILOT_")}
    env["AUTOPILOT_RUNS_DIR"] = str(runs)
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    report: dict[str, Any] = json.loads(done.stderr.strip().splitlines()[-1])
    assert report["code"] in (0, None), done.stderr
    return report


def _forbidden(modules: set[str], banned: tuple[str, ...] = _NOT_FOR_STATUS) -> list[str]:
    return sorted(
        name
        for name in modules
        if any(name == word or name.startswith(word + ".") for word in banned)
    )


@pytest.mark.parametrize(
    "args",
    [
        ["--version"],
        ["status"],
        ["status", "--json"],
        ["list"],
        ["pause"],
        ["resume"],
        ["stop"],
        ["send", "a note for the agent"],
    ],
)
def test_everyday_commands_import_no_view_driver_or_adapter(
    tmp_path: Path, args: list[str]
) -> None:
    runs = tmp_path / "runs"
    project = tmp_path / "project"
    project.mkdir()
    make_run(
        runs,
        "project",
        now_ms(),
        iterations=3,
        state={**alive_driver(), "cwd": str(project.resolve())},
        age_files=False,
    )
    report = _probe(args, project, runs)
    modules = set(report["modules"])
    # A run whose driver holds no lock is read the typed way: its records are
    # ``msgspec`` Structs (``core.structs``). The light paths load no msgspec.
    typed = args in (["status", "--json"], ["stop"])
    banned = tuple(n for n in _NOT_FOR_STATUS if not (typed and n == "msgspec"))
    assert _forbidden(modules, banned) == []
    assert typed == ("msgspec" in modules)
    # The only exit handler is the one that ends the process without tearing its
    # modules down (``launch._end_without_teardown``): none is skipped by it.
    assert report["atexit"] == 1
    # Their usual forms do not even load the command line's parser.
    assert "click" not in modules
    assert "autopilot.cli.main" not in modules
    if args[0] in ("pause", "resume", "stop"):
        assert _forbidden(modules, _NOT_FOR_CONTROL) == []
    if args[0] in ("pause", "resume"):  # no process is looked at
        assert "autopilot.runtime.liveness" not in modules
        assert "autopilot.loop.identity" not in modules
    if args[0] in ("list", "send", "--version"):
        assert "autopilot.control" not in modules
    # The log's decision records are read only where a decision is looked for.
    assert "autopilot.core.change" not in modules
    # Annotations only, under TYPE_CHECKING (msgspec, where it loads, brings typing).
    assert typed or "typing" not in modules


_TYPED_STATE = (
    "dataclasses",
    "autopilot.store.run_state",
    "autopilot.store.rundir",
    "autopilot.store.state",
    "autopilot.config",
    "autopilot.core.delivery",
    "autopilot.core.state",
    "autopilot.control",
    "autopilot.cli.control_body",
    "autopilot.runtime.ending",
    "autopilot.manage",
)
"""What ``pause``, ``resume``, ``stop`` and ``send`` of a run its driver holds leave
alone: the typed state and every user of ``dataclasses`` (``cli.control_light``,
``send_body``'s queueing for a running driver)."""


@pytest.mark.parametrize(
    "args", [["pause"], ["resume"], ["stop"], ["stop", "--now"], ["send", "a note"]]
)
def test_control_commands_of_a_held_run_load_no_typed_state(
    tmp_path: Path, args: list[str]
) -> None:
    runs = tmp_path / "runs"
    project = tmp_path / "project"
    project.mkdir()
    run_id = make_run(
        runs,
        "project",
        now_ms(),
        state={**alive_driver(), "cwd": str(project.resolve()), "paused": True},
        age_files=False,
    )
    driver = FileLock(runs / run_id / "driver.lock")  # as the run's driver holds it
    assert driver.acquire()
    try:
        modules = _imported(args, project, runs)
    finally:
        driver.release()
    assert _forbidden(modules, _TYPED_STATE) == []
    light = "autopilot.cli.send_body" if args[0] == "send" else "autopilot.cli.control_light"
    assert light in modules
    if args[0] != "send":  # the few words of a state (``core.run_words``), not all enums
        assert "autopilot.core.vocabulary" not in modules


_TYPED_STATUS = (
    *(name for name in _TYPED_STATE if name != "autopilot.cli.control_body"),
    "autopilot.store.snapshot",  # the fold's dataclass
    "autopilot.store.fold",
    "autopilot.store.reader",
    "autopilot.store.inbox",
    "autopilot.loop.messages",
    "autopilot.view.present",
)
"""What plain ``status`` of a live run leaves alone: the typed state, the snapshot fold
and the delivery model (``cli.status_light`` reads the files as plain JSON)."""


@pytest.mark.parametrize("held", [False, True])
def test_status_of_a_live_run_loads_no_typed_state(tmp_path: Path, held: bool) -> None:
    """A run whose driver is recorded alive, or only holds its ``driver.lock``."""
    runs = tmp_path / "runs"
    project = tmp_path / "project"
    project.mkdir()
    driver_fields = {"pid": None, "pidStartTime": None} if held else alive_driver()
    run_id = make_run(
        runs,
        "project",
        now_ms(),
        iterations=2,
        state={**driver_fields, "cwd": str(project.resolve())},
        age_files=False,
    )
    driver = FileLock(runs / run_id / "driver.lock")
    assert not held or driver.acquire()
    try:
        modules = _imported(["status"], project, runs)
    finally:
        if held:
            driver.release()
    assert _forbidden(modules, _TYPED_STATUS) == []
    assert "autopilot.cli.status_light" in modules
    # The few words of a state and of a log (``core.run_words``, ``core.event_words``).
    assert "autopilot.core.vocabulary" not in modules


def test_status_of_a_run_whose_driver_is_gone_is_read_the_typed_way(tmp_path: Path) -> None:
    """The check can fail: the log may hold the end of a run whose driver is gone."""
    runs = tmp_path / "runs"
    run_id = make_run(runs, "project", now_ms(), state=dead_driver(), age_files=False)
    modules = _imported(["status", run_id], tmp_path, runs)
    assert "autopilot.control" in modules
    assert "dataclasses" in modules


def test_a_run_no_driver_holds_is_stopped_the_typed_way(tmp_path: Path) -> None:
    """The check can fail: ``stop`` of a run whose ``driver.lock`` is free loads them."""
    runs = tmp_path / "runs"
    run_id = make_run(runs, "project", now_ms(), state=dead_driver(), age_files=False)
    modules = _imported(["stop", run_id], tmp_path, runs)
    assert "autopilot.control" in modules
    assert "dataclasses" in modules


def test_the_probe_sees_what_a_command_imports(tmp_path: Path) -> None:
    """The check can fail: ``watch --help`` loads the live view's command module."""
    modules = _imported(["watch", "--help"], tmp_path, tmp_path / "runs")
    assert "autopilot.cli.watch_cmds" in modules


_NOT_FOR_A_DRIVER = (
    "_hashlib",  # OpenSSL: SHA-256 comes from CPython's own module
    "email",
    "zoneinfo",
    "tomllib",  # no config file here
    "tempfile",  # nothing written through a temp file of its own
    "bz2",  # shutil's archive support, for a which or a copy it does not need here
    "lzma",
    "psutil",  # only where an agent left processes (or a stopped one) to find or end
    "socket",  # the host name comes from _socket
    "difflib",  # click's close matches of a long option: -p is taken as a short one at once
    "autopilot.agents.failures",  # an agent's error text, read only once an attempt failed
    "autopilot.agents.limits",
    "autopilot.agents.claude",
    "autopilot.agents.codex",
    "autopilot.agents.pi",
    "autopilot.agents.gemini",
    "autopilot.agents.copilot",
    "autopilot.agents.opencode",
    "autopilot.agents.aider",
    "autopilot.view.tui",
    "textual",
)


def _driven(tmp_path: Path, *, repository: bool = False) -> set[str]:
    """The modules a run of the command agent in a plain directory (or a repository)
    loads (two iterations, driven in the foreground)."""
    project = tmp_path / "project"
    project.mkdir()
    if repository:
        (project / "file.txt").write_text("x\n")
        git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com"]
        subprocess.run([*git, "init", "-q"], cwd=project, check=True)
        subprocess.run([*git, "add", "."], cwd=project, check=True)
        subprocess.run([*git, "commit", "-qm", "start"], cwd=project, check=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("AUTOPILOT_")}
    env.update(AUTOPILOT_RUNS_DIR=str(tmp_path / "runs"), XDG_CONFIG_HOME=str(tmp_path / "cfg"))
    args = ["run", "--agent", "command", "--max-iterations", "2", "--stagnation-limit", "0"]
    args += ["--completion-promise", "NEVERSAID", "-p", "x", "--", "/bin/true"]
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, *args],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    report = json.loads(done.stderr.strip().splitlines()[-1])
    assert report["code"] == 3, done.stderr
    modules = set(report["modules"])
    assert "autopilot.agents.command" in modules
    assert "autopilot.loop.driver" in modules
    return modules


def test_a_driver_run_imports_only_what_it_uses(tmp_path: Path) -> None:
    """A run of the command agent in a plain directory loads no OpenSSL, no mail or
    time-zone parser, no config reader without a config file and no other adapter:
    each is memory every driver on the machine would hold."""
    modules = _driven(tmp_path)
    assert _forbidden(modules, _NOT_FOR_A_DRIVER) == []
    if sys.platform.startswith("linux"):  # the XDG rule, without platformdirs
        assert "platformdirs" not in modules


def test_a_driver_in_a_repository_loads_no_archive_module(tmp_path: Path) -> None:
    """Its checkpoints copy the user's index without ``shutil`` (whose archive support
    loads bz2, lzma and zlib), and it loads what a driver elsewhere leaves alone."""
    modules = _driven(tmp_path, repository=True)
    assert "autopilot.workspace.checkpoints" in modules
    assert _forbidden(modules, ("shutil", "zlib", *_NOT_FOR_A_DRIVER)) == []
    assert _forbidden(modules, _NOT_FOR_A_PLAIN_RUN) == []


_NOT_FOR_A_PLAIN_RUN = (
    "autopilot.loop.backlog",  # and every loop.backlog_* module
    "autopilot.loop.backlog_end",
    "autopilot.loop.backlog_marks",
    "autopilot.loop.backlog_recovery",
    "autopilot.loop.backlog_run",
    "autopilot.loop.backlog_verify",
    "autopilot.loop.claims",
    "autopilot.loop.checks",  # a --verify command's or a work item's checks
    "autopilot.loop.verify",
    "autopilot.loop.lanes",
    "autopilot.loop.approved",
    "autopilot.store.backlog",
    "autopilot.store.backlog_intake",
    "autopilot.store.reports",
    "autopilot.core.backlog_step",
    "autopilot.core.backlog_verify",
    "autopilot.core.workitems",
    "autopilot.core.ready_queue",
    "autopilot.core.decisions",
    "autopilot.cli.detached",  # a run driven in the foreground is not detached
    "autopilot.store.lanes",  # a parallel run's lanes, a backlog run's lane
    "autopilot.loop.notify",  # only a run with notification URLs
)


def test_a_plain_run_loads_no_backlog_module(tmp_path: Path) -> None:
    """A prompt run (no backlog, no lanes, no --verify) loads none of the modules of
    work items, their checks and their marks: memory every such driver would hold."""
    assert _forbidden(_driven(tmp_path), _NOT_FOR_A_PLAIN_RUN) == []


_NOT_FOR_A_NEW_RUN = (
    "autopilot.store.records",
    "autopilot.store.reader",
    "autopilot.store.fold",
)


def test_a_new_run_reads_its_short_log_without_the_log_readers(tmp_path: Path) -> None:
    """A new run's driver does not fold the log it just created for a relaunch's
    repairs, and reads its short log (the armed limits) with json."""
    assert _forbidden(_driven(tmp_path), _NOT_FOR_A_NEW_RUN) == []


@pytest.mark.parametrize("command", ["list", "stats"])
def test_list_and_stats_of_ended_runs_over_a_long_index_load_no_msgspec(
    tmp_path: Path, command: str
) -> None:
    """A long index and ``finished.json`` are read with ``json`` alone, and a run kept
    there loads no typed state, nor pathlib or typing (runs are found by string)."""
    runs = tmp_path / "runs"
    start = now_ms() - 10_000_000
    make_run(runs, "project", start, terminal=("complete", "completion_promise"), iterations=3)
    with (runs / "index.jsonl").open("a") as index:  # past a short index's size
        index.write(json.dumps({"type": "note", "text": "x" * 300_000}) + "\n")
    _probe([command], tmp_path, runs)  # puts the run in finished.json
    modules = set(_probe([command], tmp_path, runs)["modules"])
    assert _forbidden(modules, ("msgspec", *_TYPED_STATE)) == []
    assert "pathlib" not in modules
    assert "typing" not in modules
