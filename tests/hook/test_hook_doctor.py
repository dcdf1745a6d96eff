"""What ``autopilot doctor`` checks of a hook run that has not ended, in place of a
driver: armed or not, claimed or not, its session's CLI alive or gone, a Stop cut
short."""

from __future__ import annotations

import os
from pathlib import Path

from autopilot.core.structs import replace
from autopilot.loop.identity import process_identity
from autopilot.manage.doctor import Finding, Level, check_runs
from autopilot.store.hook_registry import (
    CliProcess,
    load_armings,
    locked,
    remove_arming,
    write_arming,
)
from autopilot.store.paths import runs_root
from tests.fakes import NO_SUCH_PID, FakeClock
from tests.hook.sessions import SESSION, arm


def _of(run_id: str) -> Finding:
    (finding,) = [f for f in check_runs(runs_root()) if f.subject == f"run {run_id}"]
    return finding


def _seen_cli(cli: CliProcess) -> None:
    (armed,) = load_armings(runs_root())[0]
    with locked(runs_root()):
        write_arming(runs_root(), replace(armed, cli=cli))


def test_doctor_says_what_it_checked_of_a_hook_run(project: Path) -> None:
    run_id = arm(project, FakeClock(), session=SESSION)
    assert _of(run_id) == Finding(
        Level.NOTE,
        f"run {run_id}",
        f"hook run of claude session {SESSION}: no Stop of it answered yet",
    )
    me = process_identity(os.getpid())
    assert me is not None
    _seen_cli(CliProcess(os.getpid(), me.start_time, me.command))
    assert _of(run_id).level is Level.NOTE
    assert _of(run_id).detail.endswith(f"its CLI is alive (pid {os.getpid()})")
    (runs_root() / run_id / "iter-0000").mkdir()
    (runs_root() / run_id / "iter-0000" / "stop-ending.json").write_text("{}")
    assert "a Stop was cut short ending iteration 0" in _of(run_id).detail
    _seen_cli(CliProcess(NO_SUCH_PID, 1.0, "claude"))
    gone = _of(run_id)
    assert gone.level is Level.FAIL
    assert f"its CLI (pid {NO_SUCH_PID}) is gone" in gone.detail
    assert f"autopilot stop {run_id} ends the run" in gone.detail
    with locked(runs_root()):
        remove_arming(runs_root(), run_id)
    assert _of(run_id).level is Level.FAIL
    assert _of(run_id).detail.startswith("hook run not in the registry of armed runs")
    assert "driver" not in _of(run_id).detail


def test_doctor_shows_an_unclaimed_hook_run(project: Path) -> None:
    run_id = arm(project, FakeClock())
    finding = _of(run_id)
    assert finding.level is Level.NOTE
    assert finding.detail.startswith(
        f"hook run armed, unclaimed: the first claude session that stops in {project} until"
    )
