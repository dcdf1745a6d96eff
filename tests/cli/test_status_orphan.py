"""``status`` of a run whose driver is gone while its agent runs on (both daemon and
supervisor killed where the agent outlives its driver): the agent is named, with how
to end it."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import psutil
import pytest

from autopilot.cli.control_body import orphan_agent_line
from autopilot.store.run_state import RunState

DEAD_PID = 2**22 + 1  # above any pid_max: never a live process


@pytest.fixture
def agent() -> Iterator[subprocess.Popen[bytes]]:
    """A live process standing for an agent that outlived its driver."""
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
    yield process
    process.kill()
    process.wait()


def _state(agent_pid: int, agent_start_time: float) -> RunState:
    return RunState(
        run_id="r-1",
        pid=DEAD_PID,
        pid_start_time=1.0,
        agent_pid=agent_pid,
        agent_start_time=agent_start_time,
    )


def test_a_live_agent_without_its_driver_is_named(agent: subprocess.Popen[bytes]) -> None:
    started = psutil.Process(agent.pid).create_time()
    line = orphan_agent_line(_state(agent.pid, started), driver_alive=False)
    assert line == (
        f"agent      still running (pid {agent.pid}) without its driver: autopilot stop r-1 ends it"
    )


def test_no_agent_line_unless_it_is_the_recorded_agent_and_the_driver_is_gone(
    agent: subprocess.Popen[bytes],
) -> None:
    started = psutil.Process(agent.pid).create_time()
    # Its driver is alive: the agent is simply at work.
    assert orphan_agent_line(_state(agent.pid, started), driver_alive=True) is None
    # The pid now names another process (another start time).
    assert orphan_agent_line(_state(agent.pid, started - 1000), driver_alive=False) is None
    # The agent is gone.
    assert orphan_agent_line(_state(DEAD_PID, started), driver_alive=False) is None
