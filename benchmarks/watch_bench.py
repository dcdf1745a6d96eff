"""Benchmarks of seeing and managing runs: ``watch``, ``list``, ``stats``.

Run ``python benchmarks/watch_bench.py`` (about four minutes on a 2-core machine) or
``python benchmarks/watch_bench.py --quick`` (about a minute). Every figure is set
against a baseline measured in the same run, and the table gives the ratio.

(a) Latency from an event being appended to ``events.jsonl`` to the live view having
    refreshed the screen that shows it (``WatchApp.on_shown``, headless), median and
    p95 over many appends; baseline: the bare file-system notification (watchfiles'
    own ``watch`` noticing the same kind of append).
(b) CPU seconds ``autopilot watch`` uses over 60 s (``--quick``: 10 s) of a quiet run
    (not ended, driver alive, nothing written), in a real terminal (tmux); baseline:
    a minimal Textual app showing one line, in the same terminal for the same time.
(c) ``autopilot list`` and ``autopilot stats`` (whole processes) over 10,000
    generated runs; baseline: ``autopilot --version`` (interpreter and import
    start-up) and a bare Python pass reading the index and every ``state.json``.
(d) ``watch`` start-up on a 1,000,000-event log (about 180 MB): time to the first
    frame with the timeline, and to the whole log folded; baselines: reading the
    file's bytes, and ``json.loads`` of every line.

It writes only inside one temp directory, removed at the end unless ``--keep``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
import watchfiles

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from autopilot.view.tui import WatchApp  # noqa: E402
from autopilot.view.widgets import Timeline  # noqa: E402

T0 = 1_796_000_000_000
Row = tuple[str, str, str, str]


# -- run files ------------------------------------------------------------------


def _state(run_id: str, **changes: Any) -> dict[str, Any]:
    state: dict[str, Any] = {
        "runId": run_id,
        "label": run_id.rsplit("-", 1)[0],
        "agent": "claude",
        "model": None,
        "cwd": "/nonexistent",
        "startedAt": int(run_id.rsplit("-", 1)[1]),
        "max": 50,
        "iter": 3,
        "status": "running",
        "paused": False,
        "totalPausedMs": 0,
        "stopRequested": False,
        "pid": os.getpid(),
        "pidStartTime": psutil.Process().create_time(),
        "host": platform.node(),
        "spend": {"costUsd": 0.03, "tokens": {"input": 9000, "output": 700}, "iterations": 3},
        "terminated": False,
        "terminationReason": None,
        "version": 7,
    }
    state.update(changes)
    return state


def _line(run_id: str, ts: int, kind: str, **fields: Any) -> str:
    event = {"type": kind, "ts": ts, "runId": run_id, **fields}
    return json.dumps(event, separators=(",", ":")) + "\n"


def _iteration_lines(run_id: str, ts: int, number: int) -> list[str]:
    lines = [_line(run_id, ts, "iteration_start", iteration=number)]
    stages = ["ORIENT", "IMPLEMENT", "TEST", "COMMIT"]
    lines.append(_line(run_id, ts + 1, "stage_plan", iteration=number, stages=stages))
    for ordinal, name in enumerate(stages, start=1):
        at = ts + ordinal * 10
        lines.append(_line(run_id, at, "stage_start", stage=ordinal, stageName=name))
        for sub in range(1, 4):
            lines.append(
                _line(
                    run_id,
                    at + sub,
                    "substage",
                    iteration=number,
                    sub=sub,
                    verb="Bash",
                    argsSummary="pytest -q tests/test_something.py::test_a_long_name",
                    outcome="ok",
                    durationMs=1234,
                )
            )
        lines.append(_line(run_id, at + 5, "stage_end", stage=ordinal, stageName=name))
    tokens = {"input": 2400 * number, "output": 240 * number}
    lines.append(_line(run_id, ts + 60, "usage_update", iteration=number, tokens=tokens))
    lines.append(
        _line(
            run_id,
            ts + 61,
            "iteration_end",
            iteration=number,
            excerpt="Finished the item and committed it. Items remain, so not complete yet.",
            outcome="ok",
            tokens=tokens,
            costUsd=round(0.01 * number, 6),
            filesChanged=2,
            commits=1,
            durationMs=60_000,
        )
    )
    return lines


def write_log(path: Path, run_id: str, events: int) -> int:
    """A realistic log of about ``events`` events; returns the count written."""
    written = 0
    with path.open("w") as handle:
        handle.write(_line(run_id, T0, "armed", label="bench", maxIterations=0, agent="claude"))
        written += 1
        number = 0
        while written < events:
            number += 1
            chunk = _iteration_lines(run_id, T0 + number * 100, number)
            handle.writelines(chunk)
            written += len(chunk)
    return written


def make_quiet_run(root: Path, label: str = "quiet") -> Path:
    """A run that is not ended, whose driver (this process) is alive, and that is quiet."""
    run_id = f"{label}-{T0}"
    folder = root / run_id
    folder.mkdir(parents=True)
    (folder / "state.json").write_text(json.dumps(_state(run_id), indent=2))
    write_log(folder / "events.jsonl", run_id, 60)
    return folder


def make_many_runs(root: Path, count: int) -> None:
    """``count`` finished or running runs, each with state.json, a short log, an index row."""
    root.mkdir(parents=True, exist_ok=True)
    with (root / "index.jsonl").open("w") as index:
        for n in range(count):
            run_id = f"proj{n % 7}-{T0 + n}"
            folder = root / run_id
            folder.mkdir()
            ended = n % 10 != 0
            reason = ("completion_promise", "max_iterations", "stagnation")[n % 3]
            state = _state(
                run_id,
                iter=1 + n % 20,
                terminated=ended,
                terminationReason=reason if ended else None,
                status="completed" if ended and n % 3 == 0 else "stopped" if ended else "running",
                pid=None if ended else 999_999_999,
            )
            (folder / "state.json").write_text(json.dumps(state, indent=2) + "\n")
            lines = [_line(run_id, T0 + n, "armed", label=state["label"], agent="claude")]
            lines += _iteration_lines(run_id, T0 + n + 10, 1)
            if ended:
                kind = "complete" if n % 3 == 0 else "abort"
                lines.append(_line(run_id, T0 + n + 99, kind, reason=reason))
            (folder / "events.jsonl").write_text("".join(lines))
            index.write(lines[0])


# -- measurements --------------------------------------------------------------------


def _percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


def latency(work: Path, appends: int) -> list[Row]:
    """(a) Append an event, time until the view has refreshed with it."""
    folder = make_quiet_run(work / "latency-runs", "latency")
    log = folder / "events.jsonl"
    appended: dict[int, float] = {}
    shown: dict[int, float] = {}
    app = WatchApp(folder, liveness=lambda *_: True)

    def seen(events: list[dict[str, Any]]) -> None:
        now = time.perf_counter()
        for event in events:
            shown.setdefault(int(event["ts"]), now)

    app.on_shown = seen

    def writer() -> None:
        for n in range(appends):
            time.sleep(0.12)
            ts = T0 + 10_000_000 + n
            with log.open("a") as handle:
                appended[ts] = time.perf_counter()
                handle.write(_line(folder.name, ts, "warning", note=f"bench {n}"))

    async def drive() -> None:
        async with app.run_test(size=(120, 40)) as pilot:
            while not app.folded:
                await pilot.pause(0.01)
            await pilot.pause(0.5)
            thread = threading.Thread(target=writer)
            thread.start()
            while thread.is_alive() or len(shown) < len(appended):
                await pilot.pause(0.01)
                if not thread.is_alive() and time.perf_counter() - max(appended.values()) > 5:
                    break
            thread.join()

    asyncio.run(drive())
    view = [shown[ts] - appended[ts] for ts in appended if ts in shown]

    base_log = work / "latency-base.log"
    base_log.write_text("")
    stop = threading.Event()
    noticed: list[float] = []
    sent: list[float] = []

    def base_writer() -> None:
        time.sleep(0.5)
        for n in range(appends):
            time.sleep(0.12)
            with base_log.open("a") as handle:
                sent.append(time.perf_counter())
                handle.write(f"{n}\n")
        time.sleep(0.5)
        stop.set()

    thread = threading.Thread(target=base_writer)
    thread.start()
    for _ in watchfiles.watch(work, stop_event=stop, step=15, debounce=200, watch_filter=None):
        noticed.append(time.perf_counter())
    thread.join()
    base = [min((t for t in noticed if t >= s), default=s) - s for s in sent]
    med, p95 = statistics.median(view), _percentile(view, 0.95)
    base_med, base_p95 = statistics.median(base), _percentile(base, 0.95)
    return [
        (
            "append → on screen, median",
            _ms(med),
            _ms(base_med),
            f"{med / base_med:.1f}x" if base_med else "-",
        ),
        (
            "append → on screen, p95",
            _ms(p95),
            _ms(base_p95),
            f"{p95 / base_p95:.1f}x" if base_p95 else "-",
        ),
        (f"  (events shown: {len(view)} of {appends})", "", "", ""),
    ]


def _tmux_cpu(command: str, seconds: float, settle: float = 4.0) -> float:
    """CPU seconds (user + system) the program in a new tmux pane uses over ``seconds``."""
    server = f"bench-{uuid.uuid4().hex[:8]}"
    try:
        subprocess.run(
            ["tmux", "-L", server, "new-session", "-d", "-x", "120", "-y", "40", command],
            check=True,
        )
        time.sleep(settle)
        pane = subprocess.run(
            ["tmux", "-L", server, "list-panes", "-F", "#{pane_pid}"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()[0]
        shell = psutil.Process(int(pane))
        procs = [shell, *shell.children(recursive=True)]

        def used() -> float:
            total = 0.0
            for proc in procs:
                try:
                    times = proc.cpu_times()
                    total += times.user + times.system
                except psutil.Error:
                    pass
            return total

        before = used()
        time.sleep(seconds)
        return used() - before
    finally:
        subprocess.run(["tmux", "-L", server, "kill-server"], check=False)


def quiet_cpu(work: Path, seconds: float) -> list[Row]:
    """(b) CPU of ``autopilot watch`` on a quiet run, against a minimal Textual app."""
    if shutil.which("tmux") is None:
        return [("watch CPU on a quiet run", "skipped: tmux not installed", "", "")]
    root = work / "quiet-runs"
    folder = make_quiet_run(root)
    python = shlex.quote(sys.executable)
    env = f"env AUTOPILOT_RUNS_DIR={shlex.quote(str(root))} PYTHONPATH={REPO / 'src'}"
    watch = _tmux_cpu(f"{env} {python} -m autopilot watch {folder.name}", seconds)
    minimal = (
        "from textual.app import App\nfrom textual.widgets import Static\n"
        "class A(App):\n    def compose(self):\n        yield Static('idle')\nA().run()\n"
    )
    script = work / "minimal_app.py"
    script.write_text(minimal)
    base = _tmux_cpu(f"{python} {script}", seconds)
    return [
        (
            f"watch CPU over {seconds:g} s quiet",
            f"{watch:.2f} s ({watch / seconds:.1%} of a core)",
            f"{base:.2f} s",
            f"{watch / base:.1f}x" if base > 0 else "-",
        )
    ]


def _best_of(runs: int, command: list[str], env: dict[str, str]) -> float:
    best = float("inf")
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(command, env=env, stdout=subprocess.DEVNULL, check=True)
        best = min(best, time.perf_counter() - started)
    return best


def list_and_stats(work: Path, count: int) -> list[Row]:
    """(c) ``list`` and ``stats`` over many runs, against start-up and a bare read."""
    root = work / "many-runs"
    make_many_runs(root, count)
    env = dict(os.environ, AUTOPILOT_RUNS_DIR=str(root), PYTHONPATH=str(REPO / "src"))
    cli = [sys.executable, "-m", "autopilot"]
    startup = _best_of(3, [*cli, "--version"], env)

    def bare() -> None:
        for line in (root / "index.jsonl").read_text().splitlines():
            run_id = json.loads(line)["runId"]
            json.loads((root / run_id / "state.json").read_bytes())

    started = time.perf_counter()
    bare()
    bare_read = time.perf_counter() - started
    rows: list[Row] = [
        ("autopilot --version (start-up)", _ms(startup), "", ""),
        (f"bare read: index + {count} state.json", _ms(bare_read), "", ""),
    ]
    for args in (["list"], ["list", "--json"], ["stats"], ["stats", "--json"]):
        took = _best_of(3, [*cli, *args], env)
        rows.append(
            (
                f"autopilot {' '.join(args)} ({count} runs)",
                _ms(took),
                _ms(startup + bare_read),
                f"{took / (startup + bare_read):.1f}x",
            )
        )
    return rows


def startup(work: Path, events: int) -> list[Row]:
    """(d) ``watch`` on a very large log: first frame, and the whole log folded."""
    root = work / "big-runs"
    run_id = f"big-{T0}"
    folder = root / run_id
    folder.mkdir(parents=True)
    (folder / "state.json").write_text(json.dumps(_state(run_id), indent=2))
    log = folder / "events.jsonl"
    written = write_log(log, run_id, events)
    size_mb = log.stat().st_size / 1e6

    started = time.perf_counter()
    with log.open("rb") as handle:
        while handle.read(1 << 20):
            pass
    read_bytes = time.perf_counter() - started
    started = time.perf_counter()
    with log.open("rb") as handle:
        for raw in handle:
            json.loads(raw)
    parse_all = time.perf_counter() - started

    marks: dict[str, float] = {}

    async def drive() -> None:
        began = time.perf_counter()
        app = WatchApp(folder, liveness=lambda *_: True)
        async with app.run_test(size=(120, 40)) as pilot:
            timeline = app.query_one(Timeline)
            while "first" not in marks or "folded" not in marks:
                if "first" not in marks and len(timeline.lines) > 0:
                    marks["first"] = time.perf_counter() - began
                if "folded" not in marks and app.folded:
                    marks["folded"] = time.perf_counter() - began
                await pilot.pause(0.005)

    asyncio.run(drive())
    return [
        (f"log: {written:,} events, {size_mb:.0f} MB", "", "", ""),
        (
            "watch: first frame with the timeline",
            _ms(marks["first"]),
            f"{_ms(read_bytes)} (read bytes)",
            f"{marks['first'] / read_bytes:.2f}x",
        ),
        (
            "watch: whole log folded",
            f"{marks['folded']:.2f} s",
            f"{parse_all:.2f} s (json.loads/line)",
            f"{marks['folded'] / parse_all:.2f}x",
        ),
    ]


def _table(rows: list[Row]) -> str:
    header: Row = ("measure", "autopilot", "baseline", "ratio")
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(4)]
    lines = ["  ".join(cell.ljust(widths[i]) for i, cell in enumerate(header))]
    lines.append("  ".join("-" * width for width in widths))
    lines += ["  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)) for row in rows]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmarks and print one table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="10 s of CPU sampling, fewer runs")
    parser.add_argument("--keep", action="store_true", help="keep the temp directory")
    parser.add_argument("--only", choices=["latency", "cpu", "list", "startup"], action="append")
    args = parser.parse_args(argv)
    quick = args.quick
    work = Path(tempfile.mkdtemp(prefix="autopilot-watch-bench-"))
    sections: list[tuple[str, Callable[[], list[Row]]]] = [
        ("latency", lambda: latency(work, 20 if quick else 60)),
        ("cpu", lambda: quiet_cpu(work, 10.0 if quick else 60.0)),
        ("list", lambda: list_and_stats(work, 10_000)),
        ("startup", lambda: startup(work, 1_000_000)),
    ]
    rows: list[Row] = []
    try:
        for name, measure in sections:
            if args.only and name not in args.only:
                continue
            print(f"measuring {name}…", file=sys.stderr, flush=True)
            rows += measure()
    finally:
        if args.keep:
            print(f"files kept in {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)
    cpu = f"{psutil.cpu_count()} cores" if psutil.cpu_count() else "?"
    python = platform.python_version()
    print(f"autopilot watch benchmarks — {platform.platform()}, Python {python}, {cpu}")
    print(_table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
