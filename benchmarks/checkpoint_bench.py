"""Checkpoint benchmark: a checkpoint of a 10,000-file repository with one changed file.

Run ``python benchmarks/checkpoint_bench.py`` (about a minute on a 2-core machine;
``--files N`` and ``--repeat N`` change the sizes, ``--json FILE`` keeps the numbers).

The repository has N committed files in 100 folders. Each round changes one file and
then times, interleaved so a burst of load lands on both sides:

* ``Checkpoints.take_iteration``: the run's own index (``GIT_INDEX_FILE``), ``add
  --all``, ``write-tree``, ``commit-tree``, ``update-ref``, and the list of files
  changed since the previous checkpoint;
* ``git stash create``: the baseline (it snapshots tracked changes into a commit, using
  the user's index, and stores no ref);
* ``add --all`` into an empty index + ``write-tree``: what a checkpoint would cost if it
  did not start from the user's index (every file hashed again).

The first checkpoint of a run (its index copied from the user's) is timed once. The
table keeps the fastest round of each and gives the ratio to ``git stash create``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "src"))

from autopilot.workspace.checkpoints import Checkpoints  # noqa: E402
from autopilot.workspace.repo import open_repository  # noqa: E402


def _git(cwd: Path, *args: str, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        ["git", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=True,
        env=dict(os.environ, **(env or {})),
    )
    return done.stdout


def _make_repository(path: Path, files: int) -> None:
    path.mkdir()
    _git(path, "init", "-q", "-b", "main")
    _git(path, "config", "user.email", "bench@localhost")
    _git(path, "config", "user.name", "bench")
    for number in range(files):
        folder = path / f"pkg{number % 100:02d}"
        folder.mkdir(exist_ok=True)
        (folder / f"module{number}.py").write_text(
            "".join(f"value_{number}_{line} = {line}\n" for line in range(30))
        )
    _git(path, "add", "-A")
    _git(path, "commit", "-q", "-m", "start")


def _timed(action: Callable[[], object]) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def main() -> int:
    """Build the repository, time the rounds, print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--json", dest="json_path")
    options = parser.parse_args()

    scratch = Path(tempfile.mkdtemp(prefix="checkpoint-bench-"))
    try:
        repo = scratch / "repo"
        _make_repository(repo, options.files)
        store = Checkpoints(open_repository(repo), "bench-1", scratch / "run" / "checkpoint.index")
        changed = repo / "pkg05" / "module5.py"
        changed.write_text(changed.read_text() + "changed = 0\n")
        first = _timed(store.take_baseline)
        empty_index = scratch / "empty.index"

        def naive() -> None:
            empty_index.unlink(missing_ok=True)
            env = {"GIT_INDEX_FILE": str(empty_index)}
            _git(repo, "add", "--all", env=env)
            _git(repo, "write-tree", env=env)

        rounds: dict[str, list[float]] = {"checkpoint": [], "stash": [], "naive": []}
        for number in range(1, options.repeat + 1):
            changed.write_text(changed.read_text() + f"changed = {number}\n")
            started = time.perf_counter()
            taken = store.take_iteration(number)
            rounds["checkpoint"].append(time.perf_counter() - started)
            if len(taken.changes) != 1:
                raise SystemExit(f"round {number}: the checkpoint saw {taken.changes}")
            rounds["stash"].append(_timed(lambda: _git(repo, "stash", "create")))
            rounds["naive"].append(_timed(naive))
        best = {name: min(times) for name, times in rounds.items()}
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    git_version = _git(REPO, "--version")
    print(
        f"{options.files} files, one changed; {git_version.strip()}; Python "
        f"{platform.python_version()}; {os.cpu_count()} CPUs; load average {load}"
    )
    base = best["stash"]
    rows = [
        ("first checkpoint of a run (index copied)", first),
        ("checkpoint after an iteration", best["checkpoint"]),
        ("add --all into an empty index + write-tree", best["naive"]),
    ]
    print(f"{'figure':<44} {'time':>9}   {'git stash create':>16}   ratio")
    for label, seconds in rows:
        print(
            f"{label:<44} {seconds * 1000:>6.1f} ms   {base * 1000:>13.1f} ms   "
            f"{seconds / base:.2f}x"
        )
    if options.json_path:
        Path(options.json_path).write_text(
            json.dumps(
                {"files": options.files, "first_s": first, **{f"{k}_s": v for k, v in best.items()}}
            )
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
