"""``autopilot prune``: old inactive runs go; active runs never; dry runs change nothing."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from autopilot.manage import prune as prune_module
from autopilot.manage.prune import apply_prune, plan_prune, rewrite_index
from autopilot.store.flock import FileLock
from autopilot.store.index import INDEX_FILE
from tests.conftest import REPO_ROOT, run_cli
from tests.manage.runs import DAY_MS, alive_driver, dead_driver, make_run, now_ms, tree


def _rows(root: Path) -> list[str]:
    return [json.loads(line)["runId"] for line in (root / INDEX_FILE).read_text().splitlines()]


@pytest.fixture
def runs(tmp_path: Path) -> dict[str, str]:
    """Old and recent runs in every condition that matters to prune."""
    root = tmp_path / "runs"
    old = now_ms() - 40 * DAY_MS
    return {
        "old_ended": make_run(root, "ended", old, terminal=("complete", "completion_promise")),
        "old_gone": make_run(root, "gone", old + 1, state=dead_driver()),
        "recent": make_run(root, "recent", now_ms() - DAY_MS, terminal=("abort", "max_cost")),
        "old_active": make_run(root, "active", old + 2, state=alive_driver()),
        "old_locked": make_run(root, "locked", old + 3, terminal=("abort", "user_stopped")),
        "old_corrupt": make_run(root, "corrupt", old + 4, terminal=("abort", "x")),
        "old_orphan_row": make_run(root, "orphan", old + 5, folder=False),
        "old_unknown": make_run(root, "unknown", old + 6, state={"pid": None}),
    }


def test_prune_removes_only_old_inactive_runs(tmp_path: Path, runs: dict[str, str]) -> None:
    """Folders and rows of old, ended or abandoned runs go; everything else stays as it was."""
    root = tmp_path / "runs"
    corrupt = root / runs["old_corrupt"] / "state.json"
    times = (corrupt.stat().st_atime, corrupt.stat().st_mtime)
    corrupt.write_text("{not json")
    os.utime(corrupt, times)
    kept_rows_before = {
        line
        for line in (root / INDEX_FILE).read_text().splitlines()
        if json.loads(line)["runId"] not in (runs["old_ended"], runs["old_gone"])
    }
    lock = FileLock(root / runs["old_locked"] / "driver.lock")
    assert lock.acquire()
    try:
        plan = plan_prune(root, 30 * DAY_MS, now_ms())
        assert plan.remove == [runs["old_ended"], runs["old_gone"], runs["old_orphan_row"]]
        assert plan.kept == {
            runs["old_active"]: "driver alive",
            runs["old_locked"]: "a driver holds it",
            runs["old_corrupt"]: "state.json unreadable",
            runs["old_unknown"]: "driver state unknown",
        }
        result = apply_prune(root, plan)
    finally:
        lock.release()
    assert result.removed == plan.remove and not result.failed
    assert result.rows_dropped == 3
    for run_id in plan.remove:
        assert not (root / run_id).exists()
    for name in ("recent", "old_active", "old_locked", "old_corrupt", "old_unknown"):
        assert (root / runs[name] / "events.jsonl").exists()
    index_text = (root / INDEX_FILE).read_text()
    assert set(index_text.splitlines()) - {""} == kept_rows_before - {
        line for line in kept_rows_before if runs["old_orphan_row"] in line
    }
    assert stat.S_IMODE((root / INDEX_FILE).stat().st_mode) == 0o600
    assert not [p.name for p in root.iterdir() if ".tmp." in p.name or p.name.startswith(".")]


def test_dry_run_changes_nothing(tmp_path: Path, runs: dict[str, str]) -> None:
    """``--dry-run`` lists what would go and leaves every file and time as it was."""
    root = tmp_path / "runs"
    before = tree(root)
    done = run_cli(["prune", "--older-than", "30d", "--dry-run"], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert tree(root) == before
    assert f"would remove  {runs['old_ended']}" in done.stdout
    assert f"kept     {runs['old_active']}  (driver alive)" in done.stdout
    assert "nothing was changed" in done.stdout


def test_prune_command(tmp_path: Path, runs: dict[str, str]) -> None:
    """The command removes, reports, and rewrites the index."""
    root = tmp_path / "runs"
    done = run_cli(["prune", "--older-than=30d"], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert f"removed  {runs['old_ended']}" in done.stdout
    assert "removed 5 runs (0.0 MB); 5 index rows dropped" in done.stdout
    assert runs["old_ended"] not in _rows(root) and runs["old_active"] in _rows(root)
    again = run_cli(["prune", "--older-than", "30d"], cwd=tmp_path)
    assert "removed 0 runs" in again.stdout


@pytest.mark.parametrize("value", ["soon", "-3d", "0"])
def test_bad_age_is_a_usage_error(tmp_path: Path, value: str) -> None:
    """An unreadable age: one line, exit 2."""
    done = run_cli(["prune", "--older-than", value], cwd=tmp_path)
    assert done.returncode == 2
    assert (
        done.stderr.startswith("autopilot: error: --older-than") and "Traceback" not in done.stderr
    )


def test_rows_appended_during_the_rewrite_are_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run armed while the index is rewritten keeps its row."""
    root = tmp_path / "runs"
    old = now_ms() - 40 * DAY_MS
    gone = make_run(root, "gone", old, terminal=("abort", "x"))
    make_run(root, "kept", old + 1, terminal=("abort", "x"))
    real = prune_module.write_atomically

    def racing_write(path: Path, data: bytes) -> None:
        make_run(root, "late", now_ms())
        real(path, data)

    monkeypatch.setattr(prune_module, "write_atomically", racing_write)
    assert rewrite_index(root, {gone}) == 1
    assert [row.split("-")[0] for row in _rows(root)] == ["kept", "late"]


def test_malformed_index_rows_are_kept(tmp_path: Path) -> None:
    """Rows with an unusable run id, and lines that are not rows, survive a prune."""
    root = tmp_path / "runs"
    gone = make_run(root, "ended", now_ms() - 40 * DAY_MS, terminal=("abort", "x"))
    with (root / INDEX_FILE).open("a") as handle:
        handle.write('{"type":"armed","ts":1,"runId":"../etc"}\nnot json\n')
    result = apply_prune(root, plan_prune(root, 30 * DAY_MS, now_ms()))
    assert result.removed == [gone]
    assert (root / INDEX_FILE).read_text() == '{"type":"armed","ts":1,"runId":"../etc"}\nnot json\n'


def test_a_run_that_became_active_is_left_alone(tmp_path: Path) -> None:
    """Between plan and removal a driver took the run: it is not removed."""
    root = tmp_path / "runs"
    run_id = make_run(root, "ended", now_ms() - 40 * DAY_MS, terminal=("abort", "x"))
    plan = plan_prune(root, 30 * DAY_MS, now_ms())
    lock = FileLock(root / run_id / "driver.lock")
    assert lock.acquire()
    try:
        result = apply_prune(root, plan)
    finally:
        lock.release()
    assert result.failed == {run_id: "kept: a driver holds it"}
    assert (root / run_id / "state.json").exists() and run_id in _rows(root)


def test_leftovers_of_an_interrupted_prune_are_swept(tmp_path: Path) -> None:
    """A ``.prune-*`` folder left by a crash is deleted by the next prune."""
    root = tmp_path / "runs"
    make_run(root, "recent", now_ms(), terminal=("abort", "x"))
    (root / ".prune-old-1").mkdir()
    (root / ".prune-old-1" / "events.jsonl").write_text("{}\n")
    apply_prune(root, plan_prune(root, 30 * DAY_MS, now_ms()))
    assert not (root / ".prune-old-1").exists()


def test_prune_without_an_age_says_how(tmp_path: Path) -> None:
    """``prune --branches`` alone is one line naming --older-than and an example, exit 2."""
    done = run_cli(["prune", "--branches"], cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr == (
        "autopilot: error: prune needs --older-than AGE: which runs are old, "
        "e.g. autopilot prune --older-than 30d --branches\n"
    )


def test_every_prune_in_the_readme_is_accepted(tmp_path: Path, runs: dict[str, str]) -> None:
    """What README.md shows for ``autopilot prune`` is what the command accepts."""
    readme = (REPO_ROOT / "README.md").read_text()
    shown = [
        line.split("#", 1)[0].replace("[", "").replace("]", "").split()
        for line in readme.splitlines()
        if line.startswith("autopilot prune")
    ]
    assert len(shown) >= 2
    for words in shown:
        args = [*words[1:], *([] if "--dry-run" in words else ["--dry-run"])]
        done = run_cli(args, cwd=tmp_path)
        assert done.returncode == 0, f"{' '.join(words)}: {done.stderr}"
        assert "nothing was changed" in done.stdout
