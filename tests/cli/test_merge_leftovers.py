"""A merge killed outright (``kill -9``) while its ``--verify`` command runs: what the
command started outlives it, and the next merge of the run ends it (real processes)."""

from __future__ import annotations

from pathlib import Path

import psutil

from tests.cli.test_merge import diverged_run, gone, pids_in, start_merge
from tests.conftest import run_cli
from tests.workspace.gitstate import make_repo


def test_the_next_merge_ends_what_a_killed_merges_verify_left_running(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    run_id = diverged_run(tmp_path, repo)
    pids = tmp_path / "pids"
    # The shell dies with the merge; the grandchild it started in the background
    # does not.
    verify = f"sleep 300 & echo $! > {pids}; touch {pids}.done; wait"
    merging = start_merge(repo, run_id, verify)
    (grandchild,) = pids_in(pids, merging)
    merging.kill()
    merging.communicate(timeout=120)
    assert psutil.Process(grandchild).status() != psutil.STATUS_ZOMBIE  # it outlived the merge

    again = run_cli(["merge", run_id], cwd=repo)

    assert again.returncode == 0, again.stderr
    assert "autopilot: ended 1 process(es) a killed merge's --verify left running" in (again.stdout)
    assert gone(grandchild)
    assert not (tmp_path / "runs" / run_id / "merge-verify.running").exists()
