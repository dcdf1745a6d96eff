"""The detached daemon under its supervisor, with real processes and real signals:
restarts after kill -9, a give-up after too many, a supervisor that dies, a stop."""

from __future__ import annotations

import contextlib
import os
import signal
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from autopilot.config import RunConfig
from autopilot.errors import StateFileError
from autopilot.loop.arming import arm_run
from autopilot.loop.clock import SystemClock
from autopilot.loop.messages import queue_message
from autopilot.runtime import liveness
from autopilot.runtime.detach import spawn_supervisor
from autopilot.runtime.liveness import process_alive
from autopilot.runtime.locks import ProjectLock
from autopilot.store.events import read_events
from autopilot.store.paths import runs_root
from autopilot.store.run_state import PromptSource, decode_state
from autopilot.store.state import read_state_json
from tests.cli.test_control import _events, _terminals, _wait_for
from tests.conftest import FakeAgent, assert_one_end_per_attempt, run_cli
from tests.runtime.webhook import serve

TIMEOUT = 90.0


def driver_alive(state: dict[str, Any]) -> bool | None:
    return liveness.driver_alive(decode_state(state))


def supervisor_alive(state: dict[str, Any]) -> bool | None:
    return liveness.supervisor_alive(decode_state(state))


def _wait_file(name: str) -> dict[str, str]:
    return {"shell": f"while [ ! -f {name} ]; do sleep 0.05; done"}


def _state(folder: Path) -> dict[str, Any]:
    try:
        return read_state_json(folder / "state.json")
    except StateFileError:
        return {}


@pytest.fixture
def detach(repo: Path, fake_agent: FakeAgent, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """Arm a run in ``repo`` with a scripted agent and detach it; kills what is left."""
    folders: list[Path] = []

    def start(steps: list[list[dict[str, Any]]], **config: Any) -> Path:
        for key, value in fake_agent(steps).items():
            monkeypatch.setenv(key, value)
        root = runs_root()
        run_id = arm_run(
            root,
            RunConfig(**{"stagnation_limit": 0, **config}),
            PromptSource(text="work"),
            repo,
            SystemClock(),
        )
        folder = root / run_id
        folders.append(folder)
        spawn_supervisor(root, run_id)
        return folder

    yield start
    for folder in folders:
        state = _state(folder)
        for key, started in (("supervisorPid", "supervisorStartTime"), ("pid", "pidStartTime")):
            if process_alive(state.get(key), state.get(started)):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(state[key]), signal.SIGKILL)
    for folder in folders:  # whatever happened, no attempt is recorded twice
        assert_one_end_per_attempt(list(read_events(folder / "events.jsonl")))


def _alive_daemon(folder: Path) -> int:
    _wait_for(lambda: driver_alive(_state(folder)) is True, TIMEOUT)
    return int(_state(folder)["pid"])


def _ended(folder: Path) -> bool:
    return bool(_state(folder).get("terminated")) and not supervisor_alive(_state(folder))


def _types(folder: Path, kind: str) -> list[dict[str, Any]]:
    return [e for e in _events(folder) if e["type"] == kind]


def test_a_detached_run_completes_with_nothing_left_behind(detach: Any, repo: Path) -> None:
    previous = os.umask(0)  # the modes must come from autopilot alone
    try:
        folder = detach([[{"write_file": "a.txt"}, {"result": "step"}], [{"result": "COMPLETE"}]])
        queue_message(folder, "hello", SystemClock())
    finally:
        os.umask(previous)
    _wait_for(lambda: _ended(folder), TIMEOUT)
    assert _terminals(folder) == [("complete", "completion_promise")]
    wrong = {
        str(path.relative_to(folder)): oct(stat.S_IMODE(path.lstat().st_mode))
        for path in folder.rglob("*")
        if stat.S_IMODE(path.lstat().st_mode) != (0o700 if path.is_dir() else 0o600)
    }
    assert wrong == {}
    state = _state(folder)
    assert state["status"] == "completed" and state.get("supervisorPid") is None
    assert "completed (completion_promise)" in (folder / "daemon.out").read_text()
    assert (folder / "supervisor.log").read_text().count("supervisor") == 1


def test_kill_9_of_the_daemon_mid_stream_is_restarted_and_the_agent_told(
    detach: Any, repo: Path
) -> None:
    folder = detach(
        [
            [{"echo_prompt": True}, _wait_file("go1"), {"result": "first"}],
            [{"echo_prompt": True}, {"result": "COMPLETE"}],
        ]
    )
    first = _alive_daemon(folder)
    _wait_for(lambda: isinstance(_state(folder).get("agentPid"), int), TIMEOUT)
    os.kill(first, signal.SIGKILL)
    _wait_for(lambda: _types(folder, "supervisor_restart") != [], TIMEOUT)
    (repo / "go1").write_text("")
    _wait_for(lambda: _ended(folder), TIMEOUT)
    [restart] = _types(folder, "supervisor_restart")
    assert restart["signal"] == signal.SIGKILL and restart.get("exitCode") is None
    assert restart["restarts"] == 1
    assert _terminals(folder) == [("complete", "completion_promise")]
    # The restarted attempt was told that the previous one was cut short.
    [notice] = [e for e in _types(folder, "message_delivered") if e["source"] == "driver"]
    assert notice["kind"] == "supervisor_notice"
    prompts = sorted(folder.glob("iter-*/prompt.md"))
    assert "cut short (signal SIGKILL)" in prompts[-1].read_text()
    ends = _types(folder, "iteration_end")
    assert ends[0]["endedBy"] == "driver_died"  # charged, not lost


def test_six_crashes_within_five_minutes_give_up_once_with_a_notification(
    detach: Any, repo: Path
) -> None:
    with serve() as endpoint:
        folder = detach([[_wait_file("never"), {"result": "x"}]], notify=(endpoint.url,))
        killed: set[int] = set()
        for _ in range(6):
            _wait_for(
                lambda: (
                    driver_alive(_state(folder)) is True
                    and int(_state(folder)["pid"]) not in killed
                ),
                TIMEOUT,
            )
            pid = int(_state(folder)["pid"])
            killed.add(pid)
            os.kill(pid, signal.SIGKILL)
        _wait_for(lambda: _ended(folder), TIMEOUT)
        assert len(_types(folder, "supervisor_restart")) == 5
        [giveup] = _types(folder, "supervisor_giveup")
        assert giveup["restarts"] == 5
        assert _terminals(folder) == [("abort", "supervisor_giveup")]
        state = _state(folder)
        assert state["status"] == "error" and state["terminationReason"] == "supervisor_giveup"
        assert state.get("agentPid") is None
        _wait_for(lambda: bool(endpoint.bodies), TIMEOUT)
        assert [b["type"] for b in endpoint.bodies] == ["failure"]


def _said(folder: Path, number: int, text: str) -> bool:
    output = folder / f"iter-{number:04d}" / "stdout.log"
    return output.is_file() and text in output.read_text()


def _pid_in(folder: Path, pids: set[int]) -> bool:
    state = _state(folder)
    return driver_alive(state) is not True or int(state["pid"]) in pids


def test_three_daemon_crashes_mid_iteration_are_not_the_agents_stagnation(
    detach: Any, repo: Path
) -> None:
    # Each attempt starts with the same words, as a model given the same prompt does.
    stuck = [{"text": "Let me look at the repository."}, _wait_file("never"), {"result": "x"}]
    folder = detach(
        [stuck, stuck, stuck, [{"write_file": "a.txt"}, {"result": "COMPLETE"}]],
        stagnation_limit=3,
    )
    killed: set[int] = set()
    for number in (1, 2, 3):
        # Killed once its agent has said its first words.
        _wait_for(
            lambda n=number: _said(folder, n, "Let me look") and not _pid_in(folder, killed),
            TIMEOUT,
        )
        pid = int(_state(folder)["pid"])
        killed.add(pid)
        os.kill(pid, signal.SIGKILL)
    _wait_for(lambda: _ended(folder), TIMEOUT)
    assert _terminals(folder) == [("complete", "completion_promise")]
    assert len(_types(folder, "supervisor_restart")) == 3
    assert [e["endedBy"] for e in _types(folder, "iteration_end")] == [
        "driver_died",
        "driver_died",
        "driver_died",
        "exit",
    ]
    assert _types(folder, "stagnation") == []
    # The crashed attempts are charged all the same.
    assert _state(folder)["spend"]["iterations"] == 4


def test_the_daemon_outlives_a_killed_supervisor_and_start_adopts_it(
    detach: Any, repo: Path
) -> None:
    folder = detach([[_wait_file("go"), {"result": "COMPLETE"}]])
    daemon = _alive_daemon(folder)
    _wait_for(lambda: supervisor_alive(_state(folder)) is True, TIMEOUT)
    supervisor = int(_state(folder)["supervisorPid"])
    os.kill(supervisor, signal.SIGKILL)
    _wait_for(lambda: supervisor_alive(_state(folder)) is False, TIMEOUT)
    assert driver_alive(_state(folder)) is True
    status = run_cli(["status", folder.name], cwd=repo).stdout
    assert (
        f"supervisor gone; nothing restarts its daemon if it crashes: autopilot start "
        f"{folder.name} adopts it (pid {supervisor})"
    ) in status
    refused = run_cli(["start", folder.name, "--foreground"], cwd=repo)
    assert refused.returncode == 4 and "still being driven" in refused.stderr
    adopted = run_cli(["start", folder.name], cwd=repo)
    assert adopted.returncode == 0 and "adopting the running daemon" in adopted.stdout
    _wait_for(lambda: supervisor_alive(_state(folder)) is True, TIMEOUT)
    assert int(_state(folder)["pid"]) == daemon  # no second daemon
    again = run_cli(["start", folder.name], cwd=repo)
    assert again.returncode == 4 and "already running" in again.stderr
    # The adopting supervisor restarts the daemon it did not start.
    os.kill(daemon, signal.SIGKILL)
    _wait_for(lambda: _types(folder, "supervisor_restart") != [], TIMEOUT)
    assert (
        _types(folder, "supervisor_restart")[0]["note"] == "the daemon ended (exit status unknown)"
    )
    (repo / "go").write_text("")
    _wait_for(lambda: _ended(folder), TIMEOUT)
    assert _terminals(folder) == [("complete", "completion_promise")]


def test_both_killed_at_once_then_bare_autopilot_goes_on(detach: Any, repo: Path) -> None:
    folder = detach([[_wait_file("go"), {"result": "COMPLETE"}]])
    daemon = _alive_daemon(folder)
    _wait_for(lambda: supervisor_alive(_state(folder)) is True, TIMEOUT)
    _wait_for(lambda: isinstance(_state(folder).get("agentPid"), int), TIMEOUT)
    os.kill(int(_state(folder)["supervisorPid"]), signal.SIGKILL)
    os.kill(daemon, signal.SIGKILL)
    _wait_for(
        lambda: not driver_alive(_state(folder)) and not supervisor_alive(_state(folder)), TIMEOUT
    )
    (repo / "go").write_text("")
    done = run_cli([], cwd=repo)
    assert done.returncode == 0 and f"relaunching {folder.name}" in done.stdout
    _wait_for(lambda: _ended(folder), TIMEOUT)
    assert _terminals(folder) == [("complete", "completion_promise")]
    assert next(e["endedBy"] for e in _types(folder, "iteration_end")) == "driver_died"


def test_a_daemon_killed_while_off_is_left_until_on_relaunches_it(detach: Any, repo: Path) -> None:
    folder = detach([[_wait_file("go"), {"result": "COMPLETE"}]])
    daemon = _alive_daemon(folder)
    _wait_for(lambda: isinstance(_state(folder).get("agentPid"), int), TIMEOUT)
    assert run_cli(["off"], cwd=repo).returncode == 0
    os.kill(daemon, signal.SIGKILL)
    _wait_for(lambda: not supervisor_alive(_state(folder)), TIMEOUT)
    assert _types(folder, "supervisor_restart") == []
    [held] = [e for e in _types(folder, "warning") if "not restarted" in e["note"]]
    assert held["autopilotOn"] is False
    (repo / "go").write_text("")
    done = run_cli(["on"], cwd=repo)
    assert done.returncode == 0 and f"relaunching {folder.name}" in done.stdout
    _wait_for(lambda: _ended(folder), TIMEOUT)
    assert _terminals(folder) == [("complete", "completion_promise")]


def test_a_stop_is_not_restarted(detach: Any, repo: Path) -> None:
    folder = detach([[_wait_file("go"), {"result": "x"}]])
    _alive_daemon(folder)
    assert run_cli(["stop", folder.name, "--now"], cwd=repo).returncode == 0
    _wait_for(lambda: _ended(folder), TIMEOUT)
    assert _types(folder, "supervisor_restart") == []
    assert _terminals(folder) == [("abort", "user_stopped")]


def test_a_daemon_killed_after_a_stop_request_is_ended_not_restarted(
    detach: Any, repo: Path
) -> None:
    folder = detach([[_wait_file("go"), {"result": "x"}]])
    daemon = _alive_daemon(folder)
    assert run_cli(["stop", folder.name], cwd=repo).returncode == 0  # at the boundary
    os.kill(daemon, signal.SIGKILL)
    _wait_for(lambda: _ended(folder), TIMEOUT)
    assert _types(folder, "supervisor_restart") == []
    assert _terminals(folder) == [("abort", "user_stopped")]
    assert [e["endedBy"] for e in _types(folder, "iteration_end")] == ["driver_died"]


def test_a_relative_program_is_found_by_the_detached_daemon(tmp_path: Path, repo: Path) -> None:
    (repo / "sub").mkdir()
    program = repo / "agent.sh"
    program.write_text("#!/bin/sh\necho COMPLETE\n")
    program.chmod(0o755)
    done = run_cli(
        ["run", "--detach", "--agent", "command", "-p", "x", "--", "../agent.sh"],
        cwd=repo / "sub",
    )
    assert done.returncode == 0, done.stderr
    folder = next(p for p in (tmp_path / "runs").iterdir() if (p / "state.json").exists())
    _wait_for(lambda: _ended(folder), TIMEOUT)
    state = _state(folder)
    assert (state["status"], state["terminationReason"]) == ("completed", "completion_promise")


def test_a_missing_program_is_one_line_with_exit_2_before_detaching(
    tmp_path: Path, repo: Path
) -> None:
    done = run_cli(
        ["run", "--detach", "--agent", "command", "-p", "x", "--", "../nope.sh"], cwd=repo
    )
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "nope.sh" in done.stderr


def test_a_daemon_that_cannot_start_its_program_is_given_up_without_restarts(
    tmp_path: Path, repo: Path
) -> None:
    program = tmp_path / "agent.sh"
    program.write_text("#!/bin/sh\necho COMPLETE\n")
    program.chmod(0o755)
    root = runs_root()
    run_id = arm_run(
        root,
        RunConfig(agent="command"),
        PromptSource(text="work"),
        repo,
        SystemClock(),
        command=(str(program),),
    )
    program.unlink()  # gone between arming and the daemon's start
    folder = root / run_id
    spawn_supervisor(root, run_id)
    _wait_for(lambda: _ended(folder), TIMEOUT)
    assert _types(folder, "supervisor_restart") == []
    [giveup] = _types(folder, "supervisor_giveup")
    assert giveup["note"].startswith("the daemon cannot drive the run: ")
    assert str(program) in giveup["note"]
    state = _state(folder)
    assert (state["status"], state["terminationReason"]) == ("error", "supervisor_giveup")


def test_a_daemon_refused_for_another_run_in_its_directory_is_not_restarted(
    repo: Path, fake_agent: FakeAgent, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key, value in fake_agent([[{"result": "COMPLETE"}]]).items():
        monkeypatch.setenv(key, value)
    root = runs_root()
    run_id = arm_run(root, RunConfig(), PromptSource(text="work"), repo, SystemClock())
    folder = root / run_id
    other = ProjectLock(root, repo)
    other.acquire()  # another run's driver holds the work tree
    try:
        spawn_supervisor(root, run_id)
        _wait_for(lambda: any(_not_restarted(folder)) or _ended(folder), TIMEOUT)
        _wait_for(lambda: not supervisor_alive(_state(folder)), TIMEOUT)
    finally:
        other.release()
    assert _types(folder, "supervisor_restart") == []
    notes = _not_restarted(folder)
    assert len(notes) == 1
    assert "(exit code 5); not restarted: another run" in notes[0]
    assert _state(folder)["terminated"] is False


def _not_restarted(folder: Path) -> list[str]:
    return [e["note"] for e in _types(folder, "warning") if "not restarted" in e["note"]]


def test_an_adopting_supervisor_restarts_the_daemon_with_the_runs_environment(
    detach: Any, repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RUN_ORIGIN_MARK", "started")
    folder = detach([[_wait_file("go"), {"result": "COMPLETE"}]])
    daemon = _alive_daemon(folder)
    _wait_for(lambda: supervisor_alive(_state(folder)) is True, TIMEOUT)
    os.kill(int(_state(folder)["supervisorPid"]), signal.SIGKILL)
    _wait_for(lambda: supervisor_alive(_state(folder)) is False, TIMEOUT)
    # Adopted from another terminal, with another environment.
    adopted = run_cli(["start", folder.name], cwd=repo, env={"RUN_ORIGIN_MARK": "later"})
    assert "adopting the running daemon" in adopted.stdout
    _wait_for(lambda: supervisor_alive(_state(folder)) is True, TIMEOUT)
    os.kill(daemon, signal.SIGKILL)
    _wait_for(
        lambda: driver_alive(_state(folder)) is True and _state(folder)["pid"] != daemon, TIMEOUT
    )
    restarted = int(_state(folder)["pid"])
    environ = Path(f"/proc/{restarted}/environ").read_bytes().split(b"\0")
    assert b"RUN_ORIGIN_MARK=started" in environ
    (repo / "go").write_text("")
    _wait_for(lambda: _ended(folder), TIMEOUT)
