"""Commands import only what they need: no live view, driver, adapter, recovery code
or psutil for ``--version``, ``status``, ``list`` and the control commands (an import
check in a fresh interpreter, not a timing)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.manage.runs import alive_driver, make_run, now_ms

_PROBE = """
import json, sys
from autopilot.cli.main import main
try:
    main(sys.argv[1:])
except SystemExit as done:
    code = done.code
print(json.dumps({"code": code, "modules": sorted(sys.modules)}), file=sys.stderr)
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
)


def _imported(args: list[str], cwd: Path, runs: Path) -> set[str]:
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
    report = json.loads(done.stderr.strip().splitlines()[-1])
    assert report["code"] in (0, None), done.stderr
    return set(report["modules"])


def _forbidden(modules: set[str]) -> list[str]:
    return sorted(
        name
        for name in modules
        if any(name == banned or name.startswith(banned + ".") for banned in _NOT_FOR_STATUS)
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
    modules = _imported(args, project, runs)
    assert "autopilot.cli.main" in modules
    assert _forbidden(modules) == []


def test_the_probe_sees_what_a_command_imports(tmp_path: Path) -> None:
    """The check can fail: ``watch --help`` loads the live view's command module."""
    modules = _imported(["watch", "--help"], tmp_path, tmp_path / "runs")
    assert "autopilot.cli.watch_cmds" in modules
