"""Recovery of a crashed attempt whose saved output holds one huge line.

Run ``python benchmarks/recovery_bench.py`` (a 1 GiB line; under a minute on a
2-core machine) or ``--mib 256`` for a smaller one. A relaunch after a driver crash
re-reads the interrupted attempt's ``stdout.log`` (capped at 4 GiB) to charge what it
spent. This measures ``recover_attempt`` on a file of an init line, one assistant
line of N MiB and a result line, against two floors in the same run: Python reading
the same file in 1 MiB chunks and finding each newline, and ``wc -l``. Each reader
runs in a process of its own; peak RSS is its ``VmHWM`` at exit, growth is over its
RSS after imports. What the figures mean is in ``benchmarks/README.md``.
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
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MIB = 1024 * 1024
_START_MEASURING = """
def kib(field):
    for line in open("/proc/self/status"):
        if line.startswith(field + ":"):
            return int(line.split()[1])
before = kib("VmRSS")
started = time.perf_counter()
"""
# The measuring scripts: imports, then _START_MEASURING, then what is measured.
_MEASURE_RECOVERY = (
    """
import json, sys, time
from pathlib import Path
from autopilot.agents.claude import ClaudeAdapter
from autopilot.loop.cut_short import recover_attempt
"""
    + _START_MEASURING
    + """
recovered = recover_attempt(Path(sys.argv[1]), ClaudeAdapter())
seconds = time.perf_counter() - started
report = recovered.report
assert report.final_message == "all done COMPLETE", report
assert (report.input_tokens, report.output_tokens) == (1200, 34), report
print(json.dumps({"seconds": seconds, "peak_kib": kib("VmHWM"), "before_kib": before}))
"""
)
_MEASURE_FLOOR = (
    """
import json, sys, time
"""
    + _START_MEASURING
    + """
lines = 0
with open(sys.argv[1], "rb") as stream:
    while chunk := stream.read(1024 * 1024):
        at = chunk.find(b"\\n")
        while at >= 0:
            lines += 1
            at = chunk.find(b"\\n", at + 1)
seconds = time.perf_counter() - started
assert lines == 3, lines
print(json.dumps({"seconds": seconds, "peak_kib": kib("VmHWM"), "before_kib": before}))
"""
)


def _write_attempt(folder: Path, line_bytes: int) -> None:
    """An attempt folder like the driver leaves it: prompt.md and stdout.log."""
    sys.path.insert(0, str(REPO / "src"))
    from autopilot.testkit.streamjson import StreamJson

    folder.mkdir()
    (folder / "prompt.md").write_text("work\n")
    stream = StreamJson("bench-session", str(folder))
    block = b"x" * (8 * MIB)
    with (folder / "stdout.log").open("wb") as out:
        out.write((stream.init() + "\n").encode())
        out.write(b'{"type":"assistant","message":{"content":[{"type":"text","text":"')
        left = line_bytes
        while left > 0:
            out.write(block[: min(left, len(block))])
            left -= len(block)
        out.write(b'"}]}}\n')
        result = stream.result("all done COMPLETE", input_tokens=1200, output_tokens=34)
        out.write((result + "\n").encode())


def _measure(script: str, argument: Path) -> dict[str, float]:
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"))
    done = subprocess.run(
        [sys.executable, "-c", script, str(argument)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    measured: dict[str, float] = json.loads(done.stdout)
    return measured


def _wc_seconds(path: Path) -> float:
    started = time.perf_counter()
    subprocess.run(["wc", "-l", str(path)], capture_output=True, check=True)
    return time.perf_counter() - started


def main() -> int:
    """Write the attempt, measure each reader, print the table; returns the exit code."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mib", type=int, default=1024, help="the huge line's size (MiB)")
    parser.add_argument("--keep", action="store_true", help="keep the temp directory")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="autopilot-recovery-bench-"))
    try:
        folder = tmp / "iter-0001"
        _write_attempt(folder, args.mib * MIB)
        stdout = folder / "stdout.log"
        floor = _measure(_MEASURE_FLOOR, stdout)  # also warms the page cache
        recovery = _measure(_MEASURE_RECOVERY, folder)
        floor = min(floor, _measure(_MEASURE_FLOOR, stdout), key=lambda m: m["seconds"])
        wc = _wc_seconds(stdout)
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    size_mib = args.mib
    print(
        f"python {platform.python_version()}; {platform.system()} {platform.machine()}, "
        f"{os.cpu_count()} CPUs; load average {', '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )
    print(f"stdout.log: init line, one {size_mib:,} MiB assistant line, result line\n")
    print("| reader | time | MiB/s | peak RSS | growth while reading |")
    print("|---|---|---|---|---|")
    for name, measured in (("recover_attempt", recovery), ("Python 1 MiB chunks", floor)):
        seconds = measured["seconds"]
        peak = measured["peak_kib"] / 1024
        grown = (measured["peak_kib"] - measured["before_kib"]) / 1024
        print(
            f"| {name} | {seconds:.2f} s | {size_mib / seconds:,.0f} | {peak:.1f} MiB "
            f"| +{grown:.1f} MiB |"
        )
    print(f"| wc -l | {wc:.2f} s | {size_mib / wc:,.0f} | | |")
    print(f"\nrecover_attempt / Python floor: {recovery['seconds'] / floor['seconds']:.2f}x time")
    return 0


if __name__ == "__main__":
    sys.exit(main())
