"""``cgroup.warm_up`` moves the driver where it already is, in a thread, again and
again until ``AgentCgroup.for_run`` stops it and waits for its last move before any
cgroup of a run is made."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from autopilot.loop import cgroup
from autopilot.loop.cgroup import AgentCgroup, warm_up


@pytest.fixture
def own_cgroup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A stand-in for this process's cgroup directory (``cgroup.procs`` a plain file)."""
    own = tmp_path / "own"
    own.mkdir()
    (own / "cgroup.procs").write_text("")
    monkeypatch.setattr(cgroup, "_own_cgroup_dir", lambda: own)
    monkeypatch.setattr(cgroup, "_warming", [])
    monkeypatch.setattr(cgroup, "_warm_enough", threading.Event())
    return own


def test_the_warm_up_moves_this_process_into_its_own_cgroup(own_cgroup: Path) -> None:
    warm_up({})
    warm_up({})  # once only
    assert len(cgroup._warming) == 1
    AgentCgroup.for_run("r-1", {})  # waits for it
    assert not cgroup._warming[0].is_alive()
    assert (own_cgroup / "cgroup.procs").read_text() == "0"


@pytest.mark.parametrize("switch", ["off", "0", "no", "false", " OFF "])
def test_no_warm_up_where_agents_are_kept_out_of_cgroups(own_cgroup: Path, switch: str) -> None:
    warm_up({"AUTOPILOT_CGROUP": switch})
    assert cgroup._warming == []
    assert (own_cgroup / "cgroup.procs").read_text() == ""


def test_no_warm_up_without_a_cgroup(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cgroup, "_own_cgroup_dir", lambda: None)
    monkeypatch.setattr(cgroup, "_warming", [])
    warm_up({})
    assert cgroup._warming == []


def _count_moves(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    moves: list[Path] = []
    monkeypatch.setattr(cgroup, "_write_pid", lambda procs: moves.append(procs) or True)
    return moves


def test_the_warm_up_keeps_moving_this_process_until_a_run_makes_its_cgroup(
    own_cgroup: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    moves = _count_moves(monkeypatch)
    warm_up({})
    deadline = time.monotonic() + 30
    while len(moves) < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(moves) >= 3  # again and again: the kernel's lock stays ready
    AgentCgroup.for_run("r-2", {})
    assert not cgroup._warming[0].is_alive()
    assert set(moves) == {own_cgroup / "cgroup.procs"}


def test_the_warm_up_stops_by_itself(own_cgroup: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    moves = _count_moves(monkeypatch)
    monkeypatch.setattr(cgroup, "_KEEP_WARM_ROUNDS", 3)
    warm_up({})
    cgroup._warming[0].join(timeout=30)
    assert not cgroup._warming[0].is_alive()
    assert len(moves) == 3
