"""The Stop hook's answer time against a bare ``python -c pass`` of the same interpreter.

Run ``python benchmarks/hook_bench.py [--rounds N]``. It times, in interleaved rounds
(the fastest and the median of each kept), ``<bin>/autopilot hook claude-stop`` fed a
real Claude Code 2.1.197 Stop input (``tests/data/hook``) with **nothing armed** (an
empty runs root: the answer every session in a project with the hook installed
pays), and ``python -c pass``. ``<bin>`` is the folder of the interpreter running the
benchmark (install the package there first: ``pip install -e .``).

Aim: nothing armed answers within 4× a bare ``python -c pass`` (median against median).
Writes only inside one temp directory, removed at the end.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
INPUT = (REPO / "tests" / "data" / "hook" / "claude-2.1.197-stop-input-1.json").read_bytes()
AIM_RATIO = 4.0


def _time(argv: list[str], env: dict[str, str], stdin: bytes) -> float:
    started = time.perf_counter()
    done = subprocess.run(argv, input=stdin, capture_output=True, env=env, check=False)
    elapsed = time.perf_counter() - started
    if done.returncode != 0 or done.stdout:
        raise SystemExit(f"{argv} answered {done.returncode} {done.stdout!r} {done.stderr!r}")
    return elapsed


def main() -> int:
    """Time both, print a table, exit 1 if the aim is missed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    options = parser.parse_args()
    script = Path(sys.executable).parent / "autopilot"
    if not script.exists():
        raise SystemExit(f"{script} is missing: pip install -e . into this interpreter")
    with tempfile.TemporaryDirectory() as temp:
        env = dict(os.environ, AUTOPILOT_RUNS_DIR=str(Path(temp) / "runs"))
        hook: list[float] = []
        bare: list[float] = []
        for _ in range(options.rounds):
            bare.append(_time([sys.executable, "-c", "pass"], env, b""))
            hook.append(_time([str(script), "hook", "claude-stop"], env, INPUT))
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"load average {load:.2f}; {options.rounds} interleaved rounds")
    print(f"{'':32} {'fastest ms':>10} {'median ms':>10}")
    for name, times in (("python -c pass", bare), ("hook, nothing armed", hook)):
        print(f"{name:32} {min(times) * 1000:10.1f} {statistics.median(times) * 1000:10.1f}")
    ratio = statistics.median(hook) / statistics.median(bare)
    fastest_ratio = min(hook) / min(bare)
    print(f"ratio (median) {ratio:.2f}x, (fastest) {fastest_ratio:.2f}x; aim <= {AIM_RATIO}x")
    return 0 if ratio <= AIM_RATIO else 1


if __name__ == "__main__":
    sys.exit(main())
