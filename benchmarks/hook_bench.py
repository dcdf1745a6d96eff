"""The Stop hook's answer time against a bare ``python -c pass`` of the same interpreter.

Run ``python benchmarks/hook_bench.py [--rounds N]``. It times, in interleaved rounds
(the fastest and the median of each kept), ``<bin>/autopilot hook claude-stop`` fed a
real Claude Code 2.1.197 Stop input (``tests/data/hook``) with **nothing armed** (an
empty runs root: the answer every session in a project with the hook installed
pays), and ``python -c pass``. ``<bin>`` is the folder of the interpreter running the
benchmark (install the package there first: ``pip install -e .``).

Then, with a run armed for the session (``autopilot arm --session``), it times the
same call while the model keeps answering: each call ends an iteration through the
run's ``conclude`` step (events, state, a look at the git work tree) and starts the
next. Reported, with no aim: it runs only in an armed session, once per model turn.

Aim: nothing armed answers within 4× a bare ``python -c pass`` (median against median).
Writes only inside one temp directory, removed at the end.
"""

from __future__ import annotations

import argparse
import json
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


def _armed_rounds(temp: Path, script: Path, env: dict[str, str], rounds: int) -> list[float]:
    project = temp / "project"
    project.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=project, check=True)
    env = dict(env, CLAUDE_CODE_STOP_HOOK_BLOCK_CAP="0")
    arm = [str(script), "arm", "-p", "Go on.", "--session", "bench", "--max-iterations", "0"]
    arm += ["--stagnation-limit", "0"]
    subprocess.run(arm, cwd=project, env=env, check=True, capture_output=True)
    transcript = temp / "bench.jsonl"
    times: list[float] = []
    for number in range(rounds + 1):
        entry = {
            "type": "assistant",
            "uuid": f"a{number}",
            "message": {"id": f"m{number}", "content": [{"type": "text", "text": "working"}]},
        }
        with transcript.open("a") as handle:
            handle.write(json.dumps(entry) + "\n")
        stdin = json.dumps(
            {
                "session_id": "bench",
                "transcript_path": str(transcript),
                "cwd": str(project),
                "hook_event_name": "Stop",
                "stop_hook_active": number > 0,
                "last_assistant_message": "working",
            }
        ).encode()
        started = time.perf_counter()
        done = subprocess.run(
            [str(script), "hook", "claude-stop"],
            input=stdin,
            capture_output=True,
            env=env,
            check=False,
        )
        elapsed = time.perf_counter() - started
        if b'"block"' not in done.stdout:
            raise SystemExit(f"the armed run did not continue: {done.stdout!r} {done.stderr!r}")
        if number:  # the first call only starts iteration 1
            times.append(elapsed)
    return times


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
        armed = _armed_rounds(Path(temp), script, env, options.rounds)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"load average {load:.2f}; {options.rounds} interleaved rounds")
    print(f"{'':32} {'fastest ms':>10} {'median ms':>10}")
    rows = (("python -c pass", bare), ("hook, nothing armed", hook), ("hook, armed run", armed))
    for name, times in rows:
        print(f"{name:32} {min(times) * 1000:10.1f} {statistics.median(times) * 1000:10.1f}")
    ratio = statistics.median(hook) / statistics.median(bare)
    fastest_ratio = min(hook) / min(bare)
    print(f"ratio (median) {ratio:.2f}x, (fastest) {fastest_ratio:.2f}x; aim <= {AIM_RATIO}x")
    return 0 if ratio <= AIM_RATIO else 1


if __name__ == "__main__":
    sys.exit(main())
