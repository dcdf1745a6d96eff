"""The approved run boundary (``.autopilot/approved-run.json``) through the real driver:
its steps budget, its allowed surfaces, its stop signals, and the agent kept off it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from autopilot.core.boundary import new_boundary
from autopilot.errors import UsageError
from autopilot.loop.approved import ApprovedRun, prepare_boundary
from autopilot.store.approved_run import read_approved_run, write_approved_run
from tests.conftest import read_jsonl
from tests.fakes import Rig
from tests.loop.test_driver_backlog import ITEMS, _item_of, _work_through, agent, arm_backlog


def _approve(rig: Rig, steps: int, surfaces: tuple[str, ...] = ("**",)) -> Path:
    path = rig.root.parent / "work" / ".autopilot" / "approved-run.json"
    boundary = new_boundary(run_id="r", scope="s", steps=steps, surfaces=surfaces, source="t")
    write_approved_run(path, boundary.to_json())
    return path


def _events(rig: Rig, kind: str) -> list[dict[str, Any]]:
    return [e for e in read_jsonl(rig.folder / "events.jsonl") if e["type"] == kind]


def test_the_approved_steps_end_the_run_when_spent(tmp_path: Path) -> None:
    rig = arm_backlog(tmp_path, max_iterations=10)
    path = _approve(rig, steps=2)
    driver, runner = rig.driver([agent(rig, _work_through)])
    result = driver.run()
    assert (result.terminal_type, result.reason, result.exit_code) == (
        "abort",
        "max_iterations",
        3,
    )
    assert "the approved steps are spent" in str(result.note)
    assert [_item_of(r) for r in runner.requests] == ["alpha", "beta"]
    on_disk = json.loads(path.read_text())
    assert on_disk["budget"]["remaining_steps"] == 0 and on_disk["approved"] is True
    # The run folder keeps the copy autopilot wrote, private.
    assert (rig.folder / "approved-run.json").stat().st_mode & 0o777 == 0o600


def test_a_change_outside_the_runs_surfaces_reopens_the_item(tmp_path: Path) -> None:
    rig = arm_backlog(tmp_path, [ITEMS[2]])
    _approve(rig, steps=5, surfaces=("gamma.txt", "file.txt"))

    def decide(item: str, attempt: int, cwd: Path) -> Any:
        # The second attempt undoes the change (left there, it would reopen it again).
        rig.workspace.touched = {"deploy/prod.yaml"} if attempt == 1 else set()
        return "continue_next", {}, ("done",)

    driver, runner = rig.driver([agent(rig, decide)])
    assert driver.run().reason == "backlog_done"
    assert [v["paths"] for v in _events(rig, "surface_violation")] == [["deploy/prod.yaml"]]
    first, second = (r.attempt.prompt.read_text() for r in runner.requests)
    assert "gamma.txt" in first  # the run's surfaces fence an item that names none
    assert "outside the allowed surface: deploy/prod.yaml" in second


def test_without_a_boundary_every_path_is_allowed(tmp_path: Path) -> None:
    rig = arm_backlog(tmp_path, [ITEMS[2]])

    def decide(item: str, attempt: int, cwd: Path) -> Any:
        rig.workspace.touched = {"anywhere/at/all.txt"}
        return "continue_next", {}, ("done",)

    driver, runner = rig.driver([agent(rig, decide)])
    assert driver.run().reason == "backlog_done"
    assert _events(rig, "surface_violation") == [] and len(runner.requests) == 1


def test_the_agent_cannot_widen_its_boundary(tmp_path: Path) -> None:
    rig = arm_backlog(tmp_path, [ITEMS[2]])
    path = _approve(rig, steps=3, surfaces=("gamma.txt", "file.txt"))

    def decide(item: str, attempt: int, cwd: Path) -> Any:
        data = json.loads(path.read_text())
        data["allowed_surfaces"], data["budget"]["remaining_steps"] = ["**"], 99
        path.write_text(json.dumps(data))
        return "continue_next", {}, ("done",)

    driver, _ = rig.driver([agent(rig, decide)])
    assert driver.run().reason == "backlog_done"
    on_disk = json.loads(path.read_text())
    assert on_disk["allowed_surfaces"] == ["gamma.txt", "file.txt"]
    assert on_disk["budget"]["remaining_steps"] == 2
    notes = [e["note"] for e in _events(rig, "warning")]
    assert any("approved-run.json was changed while the agent worked; put back" in n for n in notes)


@pytest.mark.parametrize(
    ("change", "reason", "note"),
    [
        ({"status": "stopped"}, "user_stopped", "status is 'stopped'"),
        ({"approved": False}, "user_stopped", "approved is no longer true"),
        ({"budget": {"remaining_steps": 0}}, "max_iterations", "steps are spent"),
        (None, "user_stopped", "approved-run.json was removed"),
    ],
)
def test_a_person_stops_the_approved_run_the_seeds_ways(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    change: dict[str, Any] | None,
    reason: str,
    note: str,
) -> None:
    rig = arm_backlog(tmp_path, max_iterations=10)
    path = _approve(rig, steps=5)
    calls: list[str] = []

    def decide(item: str, attempt: int, cwd: Path) -> Any:
        calls.append(item)
        return _work_through(item, attempt, cwd)

    driver, _ = rig.driver([agent(rig, decide)])
    original_end = ApprovedRun.end

    def end_then_person(self: ApprovedRun) -> None:
        original_end(self)
        # Between iterations (the boundary), a person stops the approved run.
        if change is None:
            path.unlink()
        else:
            path.write_text(json.dumps({**json.loads(path.read_text()), **change}))

    monkeypatch.setattr(ApprovedRun, "end", end_then_person)
    result = driver.run()
    assert (result.terminal_type, result.reason) == ("abort", reason)
    assert note in str(result.note)
    assert calls == ["alpha"]


def test_a_broken_boundary_file_holds_the_run_until_it_is_fixed(tmp_path: Path) -> None:
    rig = arm_backlog(tmp_path, [ITEMS[2]])
    path = rig.root.parent / "work" / ".autopilot" / "approved-run.json"
    path.write_text('{"approved": true, "status": "running"')
    held: list[str] = []
    plain_sleep = rig.clock.sleep

    def sleep(seconds: float) -> None:
        plain_sleep(seconds)
        if not held:
            held.append("yes")
            _approve(rig, steps=3)

    rig.clock.sleep = sleep  # type: ignore[method-assign]
    driver, runner = rig.driver([agent(rig, lambda i, n, c: ("continue_next", {}, ("ok",)))])
    assert driver.run().reason == "backlog_done"
    assert held == ["yes"] and len(runner.requests) == 1
    pauses = [e.get("note") or "" for e in _events(rig, "pause")]
    assert any("fix .autopilot/approved-run.json first" in p for p in pauses)


def test_prepare_boundary_approves_or_refuses(tmp_path: Path) -> None:
    written = prepare_boundary(
        tmp_path, approve=True, steps=4, surfaces=(), item_surfaces=["src/...", "src/..."]
    )
    assert written is not None and written.allowed_surfaces == ("src/...",)
    found = read_approved_run(tmp_path / ".autopilot" / "approved-run.json")
    assert found.boundary is not None and found.boundary.remaining_steps == 4
    assert found.data["approval_evidence"]["source"] == "autopilot run --backlog --approve"
    with pytest.raises(UsageError, match="--surface PATTERN"):
        prepare_boundary(tmp_path, approve=True, steps=4, surfaces=(), item_surfaces=[])
    with pytest.raises(UsageError, match="--max-iterations N"):
        prepare_boundary(tmp_path, approve=True, steps=0, surfaces=("a",), item_surfaces=[])
    (tmp_path / ".autopilot" / "approved-run.json").write_text('{"approved": false}')
    with pytest.raises(UsageError, match=r"is not in force .*approved is not true"):
        prepare_boundary(tmp_path, approve=False, steps=4, surfaces=(), item_surfaces=[])
    (tmp_path / ".autopilot" / "approved-run.json").unlink()
    assert prepare_boundary(tmp_path, approve=False, steps=4, surfaces=(), item_surfaces=[]) is None
