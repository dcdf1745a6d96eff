"""Core benchmarks: loop overhead, log folding, and driver memory under a huge stream.

Run ``python benchmarks/core_bench.py`` (about three minutes on a 2-core machine) or
``python benchmarks/core_bench.py --quick`` (a smoke run of under a minute); add
``--rev HEAD`` to measure a commit rather than a work tree that others may be editing.
Every figure is set against a baseline measured in the same run, and the table gives
the ratio; what each row means is in ``benchmarks/README.md``.

(a) ``autopilot run`` driving N iterations of a trivial agent, against a bare bash
    loop running the same program N times (outside and inside a git repository, and
    with a Claude stream-json agent).
(b) ``fold(read_events(path))`` over a generated log of realistic events, against a
    plain ``json.loads`` per line of the same file; time and peak RSS, each measured
    in a fresh subprocess.
(c) The driver's own peak RSS (its ``VmHWM`` read at exit, so neither the agent
    nor this script is counted) while one iteration's agent prints ~1 GiB of Claude
    stream-json, against ``cat`` and a minimal Python reader of the same stream.

The script also runs itself in hidden roles (``_measure``, ``_agent_stream``,
``_py_reader``, ``_drive``) so each measurement has a process of its own. It writes
only inside one temp directory, removed at the end unless ``--keep``.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
SRC_ENV = "CORE_BENCH_SRC"
"""Where the measured ``autopilot`` package lives (``--rev`` points it at an export)."""
MIB = 1024 * 1024
PROMISE = "COMPLETE"
FINAL_TEXT = f"All work is finished and verified.\n<promise>{PROMISE}</promise>"

_WORD_TEXT = (
    "the loop agent iteration commit test passes fails file module parser event log fold "
    "snapshot driver budget stagnation promise session token cost state writes reads "
    "refactor function return value error retry resume branch worktree café naïve Größe "
    'daß 東京 ✓ → «quoted» "quote" back\\slash tab\tnew'
)
_WORDS = _WORD_TEXT.split(" ")


def _text(rng: random.Random, n_chars: int) -> str:
    """Prose-like text of about ``n_chars`` characters, with escapes and non-ASCII."""
    words: list[str] = []
    size = 0
    while size < n_chars:
        word = rng.choice(_WORDS)
        words.append(word)
        size += len(word) + 1
        if rng.random() < 0.02:
            words.append("\n")
    return " ".join(words)[:n_chars]


def _src() -> str:
    return os.environ.get(SRC_ENV) or str(REPO / "src")


def _child_env(runs_dir: Path | None = None) -> dict[str, str]:
    """The environment for every child: the measured code first, no stray AUTOPILOT_*."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AUTOPILOT_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [_src(), env.get("PYTHONPATH")]))
    if runs_dir is not None:
        env["AUTOPILOT_RUNS_DIR"] = str(runs_dir)
    return env


def _self(*args: str) -> list[str]:
    return [sys.executable, str(Path(__file__).resolve()), *args]


def _best_times(repeat: int, *runs: Callable[[], object]) -> list[float]:
    """Wall seconds of each callable: the fastest of ``repeat`` interleaved rounds.

    Interleaving and taking the minimum keep a burst of load from other processes
    from landing on one side of a ratio only.
    """
    best = [float("inf")] * len(runs)
    for _ in range(repeat):
        for index, run_once in enumerate(runs):
            started = time.perf_counter()
            run_once()
            best[index] = min(best[index], time.perf_counter() - started)
    return best


def _rss_kib(field: str) -> int:
    """This process's ``VmRSS`` or ``VmHWM`` (peak) in KiB, from /proc/self/status.

    Not ``ru_maxrss``: that one carries over the high-water mark of the process we
    were forked from (the kernel keeps it across exec), which would credit the
    benchmark's own memory to whatever it measures. Falls back to it off Linux.
    """
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)


def _row(
    figure: str, autopilot: str, baseline: str, ratio: float | None, raw: Any = None
) -> dict[str, Any]:
    """One line of the table; ``raw`` holds the unformatted numbers for ``--json``."""
    row = {"figure": figure, "autopilot": autopilot, "baseline": baseline, "ratio": ratio}
    row["raw"] = raw
    _progress(row)
    return row


# -- (a) loop overhead -------------------------------------------------------------


def _bash_loop(n: int, argv: list[str], cwd: Path) -> None:
    script = 'n=$1; shift; for ((i = 0; i < n; i++)); do "$@" </dev/null >/dev/null; done'
    subprocess.run(["bash", "-c", script, "bash", str(n), *argv], cwd=cwd, check=True)


def _autopilot_loop(
    n: int, agent: str, argv: list[str], cwd: Path, runs: Path, claude_bin: str | None = None
) -> None:
    env = _child_env(runs)
    if claude_bin is not None:
        env["AUTOPILOT_CLAUDE_BIN"] = claude_bin
    cmd = [sys.executable, "-m", "autopilot", "run", "--agent", agent]
    cmd += ["--max-iterations", str(n), "--stagnation-limit", "0"]
    cmd += ["--completion-promise", "NEVERSAID", "-p", "x"]
    if argv:
        cmd += ["--", *argv]
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, check=False)
    if done.returncode != 3:  # 3: a limit was reached (max_iterations), as intended
        raise SystemExit(f"autopilot run exited {done.returncode}:\n{done.stderr.decode()}")


def _check_loop_runs(runs: Path, n: int) -> None:
    """Every run timed did N ok iterations and stopped on max_iterations; then remove them.

    Done after the timing, so neither the check nor the cleanup is timed.
    """
    from autopilot.store.events import read_events
    from autopilot.store.fold import fold

    for run in [p for p in runs.iterdir() if p.is_dir() and not p.name.startswith(".")]:
        events = list(read_events(run / "events.jsonl"))
        snap = fold(events)
        bad = [e for e in events if e["type"] == "iteration_end" and e.get("outcome") != "ok"]
        if snap.iteration != n or snap.reason != "max_iterations" or bad:
            raise SystemExit(
                f"unexpected run {run} (kept): {snap.iteration=} {snap.reason=}, "
                f"{len(bad)} iteration(s) not ok, the first: {bad[:1]}"
            )
        shutil.rmtree(run)


def _make_git_repo(path: Path) -> None:
    path.mkdir()
    git = ["git", "-c", "user.name=bench", "-c", "user.email=bench@example.invalid"]
    subprocess.run([*git, "init", "-q"], cwd=path, check=True)
    rng = random.Random(7)
    for index in range(40):
        folder = path / ("src" if index % 2 else "tests")
        folder.mkdir(exist_ok=True)
        (folder / f"mod_{index:02d}.py").write_text(_text(rng, 2000))
    (path / "README.md").write_text("# bench repo\n")
    # Dated a minute back, as files are in a repository not written this second. Git
    # takes an entry whose file is no older than the index for "racily clean" and
    # re-reads the file at every status (https://git-scm.com/docs/racy-git): left
    # as written, all 41 would be read again at every mark of the run.
    written = time.time() - 60
    for file in path.rglob("*"):
        if file.is_file() and ".git" not in file.parts:
            os.utime(file, (written, written))
    subprocess.run([*git, "add", "-A"], cwd=path, check=True)
    subprocess.run([*git, "commit", "-qm", "initial"], cwd=path, check=True)


def _claude_tiny_agent(folder: Path) -> Path:
    """A `claude` stand-in: a sh script that cats a recorded 4-line stream."""
    from autopilot.testkit.streamjson import StreamJson

    stream = StreamJson("bench-session", str(folder))
    lines = [
        stream.init(),
        stream.tool_use("toolu_1", "Bash", {"command": "ls"}),
        stream.tool_result("toolu_1", "README.md"),
        stream.result("Nothing left to do here.", input_tokens=10, output_tokens=5),
    ]
    recorded = folder / "tiny-stream.jsonl"
    recorded.write_text("\n".join(lines) + "\n")
    script = folder / "claude-tiny"
    script.write_text(f"#!/bin/sh\nexec cat '{recorded}'\n")
    script.chmod(0o755)
    return script


def bench_loop(tmp: Path, n: int, repeat: int) -> list[dict[str, Any]]:
    """Section (a): rows for /bin/true, /bin/true in a git repo, and a Claude stream."""
    runs = tmp / "runs-a"
    runs.mkdir()
    plain = tmp / "plain-project"
    plain.mkdir()
    repo = tmp / "git-project"
    _make_git_repo(repo)
    claude = _claude_tiny_agent(tmp)
    cases = [
        ("/bin/true", plain, "command", ["/bin/true"], None),
        ("/bin/true, in a git repo", repo, "command", ["/bin/true"], None),
        ("claude stream-json (sh+cat, 4 lines)", plain, "claude", [], str(claude)),
    ]
    startup, bare_python = _best_times(
        repeat,
        functools.partial(_autopilot_loop, 1, "command", ["/bin/true"], plain, runs),
        functools.partial(subprocess.run, [sys.executable, "-c", "pass"], check=True),
    )
    _check_loop_runs(runs, 1)
    rows = [
        _row(
            "(a) startup: autopilot run, 1 iteration of /bin/true",
            f"{startup:.2f} s",
            f"python -c pass {bare_python:.3f} s",
            startup / bare_python,
            {"autopilot_s": startup, "python_s": bare_python},
        )
    ]
    for title, cwd, agent, argv, claude_bin in cases:
        bare, driven = _best_times(
            repeat,
            functools.partial(_bash_loop, n, argv or [str(claude)], cwd),
            functools.partial(_autopilot_loop, n, agent, argv, cwd, runs, claude_bin),
        )
        _check_loop_runs(runs, n)
        rows.append(
            _row(
                f"(a) {n} iterations: {title}",
                f"{driven:.2f} s ({driven / n * 1000:.1f} ms/it)",
                f"bash loop {bare:.3f} s ({bare / n * 1000:.2f} ms/it)",
                driven / bare,
                {"autopilot_s": driven, "bash_s": bare, "iterations": n},
            )
        )
    return rows


# -- (b) folding a big log ---------------------------------------------------------


def _log_events(n_events: int) -> Iterator[dict[str, Any]]:
    """A realistic event mix, ~240 bytes per event like the seed's 1M-event log."""
    rng = random.Random(42)
    excerpts = [_text(rng, rng.randint(250, 700)) for _ in range(64)]
    summaries = [_text(rng, rng.randint(40, 200)) for _ in range(64)]
    verbs = ("Bash", "Read", "Edit", "Write", "Grep", "Glob", "TodoWrite", "Task")
    stages = ["PLAN", "EDIT", "TEST", "COMMIT", "PUSH", "END"]
    run_id = "bench-1796000000000"
    ts = 1_796_000_000_000
    count = 0
    iteration = 0
    output_tokens = 0

    def event(event_type: str, **fields: Any) -> dict[str, Any]:
        nonlocal ts, count
        ts += rng.randint(1, 400)
        count += 1
        return {"type": event_type, "ts": ts, "runId": run_id, **fields}

    yield event(
        "armed",
        label="bench",
        startedAt=ts,
        maxIterations=0,
        minIterations=1,
        contextMode="fresh",
        mode="prompt",
        agent="claude",
        model="opus",
        cwd="/w/p",
    )
    yield event("driver_start", pid=4242, agent="claude", verifiedVersion="2.1.197")
    while count < n_events - 1:
        iteration += 1
        yield event("iteration_start", iteration=iteration)
        if iteration % 10 == 1:
            yield event("session_attached", iteration=iteration, sessionId=f"s-{iteration:08d}")
            yield event("stage_plan", stages=stages)
            yield event("workitem_start", kind="issue", ref=iteration, title=summaries[0])
        for stage_no, stage in enumerate(stages[:3], start=1):
            yield event("stage_start", stage=stage_no, stageName=stage)
            yield event("task_start", stage=stage, sub=1, desc=summaries[stage_no])
            for sub in range(1, 5):
                yield event(
                    "substage",
                    sub=sub,
                    verb=rng.choice(verbs),
                    argsSummary=rng.choice(summaries),
                    outcome="ok",
                    durationMs=rng.randint(5, 9000),
                )
            yield event("task_end", stage=stage, sub=1, outcome="ok")
            output_tokens += rng.randint(50, 900)
            yield event(
                "usage_update",
                iteration=iteration,
                tokens={"input": 0, "output": output_tokens},
                premiumRequests=iteration,
                excerpt=rng.choice(summaries),
            )
            yield event("stage_end", stage=stage_no, stageName=stage, outcome="ok")
        if iteration % 3 == 0:
            yield event(
                "commit_observed",
                iteration=iteration,
                sha=f"{rng.getrandbits(160):040x}",
                subject=rng.choice(summaries)[:72],
                trailers=["Signed-off-by: bench"],
            )
        yield event(
            "backlog_snapshot", redCi=0, openPrs=2, openIssues=14, closedByLoop=iteration // 10
        )
        if iteration % 10 == 0:
            yield event("workitem_end", kind="issue", ref=iteration - 9, closesN=1)
        yield event(
            "iteration_end",
            iteration=iteration,
            excerpt=rng.choice(excerpts),
            outcome="ok",
            exitCode=0,
            endedBy="exit",
            tokens={"input": 0, "output": output_tokens},
            costUsd=round(iteration * 0.0131, 6),
            iterationTokens={"input": 1200, "output": 400},
            filesChanged=3,
            commits=int(iteration % 3 == 0),
            toolCalls=12,
            progress="made",
            durationMs=rng.randint(20_000, 400_000),
        )
    yield event("complete", reason="complete", note="promise seen", iteration=iteration)


def write_log(path: Path, n_events: int) -> tuple[int, int]:
    """Write the log with ``serialize_event`` (the writer EventLog uses).

    Returns:
        (events written, bytes).
    """
    from autopilot.store.events import serialize_event

    written = 0
    with path.open("wb", buffering=4 * MIB) as handle:
        for event in _log_events(n_events):
            line = serialize_event(event)
            if line is not None:
                handle.write(line + b"\n")
                written += 1
    return written, path.stat().st_size


def _role_measure(kind: str, path: str) -> None:
    """Child role: time one way of reading the log; print time and peak RSS as JSON."""
    import gc

    rss_before = _rss_kib("VmRSS")
    started = time.perf_counter()
    detail: Any = None
    if kind == "lines":
        with open(path, "rb") as handle:
            detail = sum(1 for _ in handle)
    elif kind == "json":
        loads = json.loads
        with open(path, "rb") as handle:
            detail = sum(1 for line in handle if loads(line) is not None)
    elif kind == "read_events":
        from autopilot.store.events import read_events

        rss_before = _rss_kib("VmRSS")
        started = time.perf_counter()
        detail = sum(1 for _ in read_events(Path(path)))
    elif kind == "fold":
        try:
            from autopilot.store.reader import read_snapshot
        except ImportError:  # a commit from before the streaming reader
            from autopilot.store.events import read_events
            from autopilot.store.fold import fold

            def read_snapshot(log: Path) -> Any:
                return fold(read_events(log))

        rss_before = _rss_kib("VmRSS")
        started = time.perf_counter()
        snap = read_snapshot(Path(path))
        detail = {"status": snap.status, "iteration": snap.iteration, "tokens": snap.tokens}
    elapsed = time.perf_counter() - started
    gc.collect()
    peak = _rss_kib("VmHWM")
    print(
        json.dumps(
            {"seconds": elapsed, "rss_before_kib": rss_before, "peak_kib": peak, "detail": detail}
        )
    )


def _measure(kind: str, path: Path) -> dict[str, Any]:
    done = subprocess.run(
        _self("_measure", kind, str(path)), env=_child_env(), capture_output=True, check=True
    )
    return dict(json.loads(done.stdout))


def bench_fold(tmp: Path, n_events: int, repeat: int) -> list[dict[str, Any]]:
    """Section (b): wc -l, line reading, json.loads, read_events and fold of one log."""
    path = tmp / "events.jsonl"
    started = time.perf_counter()
    written, size = write_log(path, n_events)
    print(
        f"  (generated {written:,} events, {size / 1e6:.0f} MB, "
        f"{size / written:.0f} B/event, in {time.perf_counter() - started:.1f} s)",
        file=sys.stderr,
    )
    kinds = ("lines", "json", "read_events", "fold")
    results: dict[str, dict[str, Any]] = {}
    for _ in range(repeat):  # interleaved; the fastest run of each kind is kept
        for kind in kinds:
            run = _measure(kind, path)
            if kind not in results or run["seconds"] < results[kind]["seconds"]:
                results[kind] = run
    (wc,) = _best_times(
        repeat, functools.partial(subprocess.run, ["wc", "-l", str(path)], capture_output=True)
    )
    snap = results["fold"]["detail"]
    if snap["status"] != "complete":
        raise SystemExit(f"fold gave an unexpected snapshot: {snap}")
    base = results["json"]
    rows = [
        _row(
            f"(b) log: {written:,} events, {size / 1e6:.0f} MB",
            "",
            f"wc -l {wc:.3f} s",
            None,
            {"events": written, "bytes": size, "wc_s": wc},
        )
    ]
    labels = {
        "lines": "  iterate lines only (Python)",
        "json": "  json.loads per line (the baseline)",
        "read_events": "  read_events (parse + validate)",
        "fold": "  fold of the whole log (read_snapshot)",
    }
    for kind, label in labels.items():
        r = results[kind]
        growth = (r["peak_kib"] - r["rss_before_kib"]) / 1024
        per_event = r["seconds"] / written * 1e6
        rows.append(
            _row(
                f"{label}: time",
                f"{r['seconds']:.2f} s ({per_event:.2f} µs/event)",
                f"json.loads {base['seconds']:.2f} s",
                r["seconds"] / base["seconds"],
                r,
            )
        )
        rows.append(
            _row(
                f"{label}: peak RSS",
                f"{r['peak_kib'] / 1024:.1f} MiB (+{growth:.1f} while reading)",
                f"json.loads {base['peak_kib'] / 1024:.1f} MiB",
                r["peak_kib"] / base["peak_kib"],
            )
        )
    return rows


# -- (c) a 1 GiB stream through one iteration --------------------------------------


def _role_agent_stream(total_bytes: str) -> None:
    """Child role: print ~N bytes of Claude stream-json (64 KiB–1 MiB lines), then a result."""
    from autopilot.testkit.streamjson import StreamJson

    rng = random.Random(1)
    stream = StreamJson("bench-big-session", os.getcwd())
    sizes = [64 * 1024 + (MIB - 64 * 1024) * i // 15 for i in range(16)]
    rng.shuffle(sizes)
    lines = [(stream.text(_text(rng, size)) + "\n").encode() for size in sizes]
    out = sys.stdout.buffer
    target = int(total_bytes)
    sent = 0
    out.write((stream.init() + "\n").encode())
    index = 0
    while sent < target:
        line = lines[index % len(lines)]
        out.write(line)
        sent += len(line)
        index += 1
    out.write((stream.text(FINAL_TEXT) + "\n").encode())
    out.write(
        (stream.result(FINAL_TEXT, input_tokens=1000, output_tokens=1 + sent // 4) + "\n").encode()
    )
    out.flush()


def _role_py_reader() -> None:
    """Child role: the minimal Python consumer, json.loads per stdin line."""
    loads = json.loads
    count = sum(1 for line in sys.stdin.buffer if loads(line) is not None)
    print(json.dumps({"lines": count, "peak_kib": _rss_kib("VmHWM")}))


def _role_drive(report_path: str, *argv: str) -> None:
    """Child role: `autopilot ARGV` in this process; at exit write its own peak RSS."""
    import atexit

    def report() -> None:
        Path(report_path).write_text(json.dumps({"peak_kib": _rss_kib("VmHWM")}))

    atexit.register(report)
    from autopilot.cli.main import main

    sys.argv = ["autopilot", *argv]
    main()


def _agent_script(folder: Path, total_bytes: int) -> Path:
    """An executable that ignores its arguments and prints the stream (for either agent)."""
    script = folder / f"agent-stream-{total_bytes}"
    argv = " ".join(f"'{a}'" for a in _self("_agent_stream", str(total_bytes)))
    script.write_text(f"#!/bin/sh\nexec {argv}\n")
    script.chmod(0o755)
    return script


def _pipe_baseline(tmp: Path, total_bytes: int, consumer: str) -> tuple[float, int]:
    """Time ``generator | consumer`` and return (seconds, the consumer's peak RSS in KiB).

    ``consumer`` is ``cat`` (to /dev/null, its peak taken by ``/usr/bin/time``, which
    forks it from a small process) or ``py`` (``_py_reader``, which reports its own).
    """
    peak_file = tmp / f"peak-{consumer}.txt"
    if consumer == "cat":
        argv = ["cat"]
        if Path("/usr/bin/time").exists():
            argv = ["/usr/bin/time", "-f", "%M", "-o", str(peak_file), "cat"]
    else:
        argv = _self("_py_reader")
    started = time.perf_counter()
    gen = subprocess.Popen(
        _self("_agent_stream", str(total_bytes)), env=_child_env(), stdout=subprocess.PIPE
    )
    assert gen.stdout is not None
    reader = subprocess.Popen(argv, stdin=gen.stdout, stdout=subprocess.PIPE, env=_child_env())
    gen.stdout.close()
    output, _ = reader.communicate()
    if gen.wait() != 0 or reader.returncode != 0:
        raise SystemExit(f"baseline pipeline {consumer} failed")
    elapsed = time.perf_counter() - started
    if consumer == "py":
        return elapsed, int(json.loads(output)["peak_kib"])
    if peak_file.exists():
        return elapsed, int(peak_file.read_text().split()[-1])
    return elapsed, 0


def _drive_stream(tmp: Path, total_bytes: int, runs: Path, agent: str = "claude") -> dict[str, Any]:
    """One `autopilot run` iteration over the stream, checked; time and driver peak RSS.

    With ``claude`` the run must complete by its promise, with the result parsed. With
    ``command`` (plain text: the JSON-quoted promise does not count) it must end on
    max_iterations after one ok iteration.
    """
    from autopilot.store.events import read_events
    from autopilot.store.fold import fold

    project = tmp / f"stream-{agent}-{total_bytes}"
    project.mkdir()
    env = _child_env(runs)
    script = str(_agent_script(tmp, total_bytes))
    report = tmp / f"drive-{agent}-{total_bytes}.json"
    argv = ["run", "--agent", agent, "--max-iterations", "1", "--stagnation-limit", "0", "-p", "x"]
    if agent == "claude":
        env["AUTOPILOT_CLAUDE_BIN"] = script
    else:
        argv += ["--", script]
    started = time.perf_counter()
    done = subprocess.run(
        _self("_drive", str(report), *argv), cwd=project, env=env, capture_output=True, check=False
    )
    elapsed = time.perf_counter() - started
    run = next(p for p in runs.iterdir() if p.name.startswith(project.name + "-"))
    events = list(read_events(run / "events.jsonl"))
    snap = fold(events)
    end = next((e for e in events if e["type"] == "iteration_end"), {})
    stdout_log = run / "iter-0001" / "stdout.log"
    checks = {
        "iteration ok": end.get("outcome") == "ok",
        "no line skipped": not end.get("oversizedLines"),
        "whole stream kept": stdout_log.stat().st_size >= total_bytes,
    }
    if agent == "claude":
        checks["exit 0"] = done.returncode == 0
        checks["complete by promise"] = snap.reason == "completion_promise"
        checks["result parsed"] = (
            PROMISE in str(end.get("excerpt"))
            and end.get("iterationTokens", {}).get("output", 0) > 0
        )
    else:
        checks["exit 3"] = done.returncode == 3 and snap.reason == "max_iterations"
    failed = [name for name, ok in checks.items() if not ok]
    if failed:
        raise SystemExit(f"{agent} stream run failed {failed}:\n{done.stderr.decode()[-2000:]}")
    measured = json.loads(report.read_text())
    result = {"seconds": elapsed, "stdout_log_bytes": stdout_log.stat().st_size, **measured}
    shutil.rmtree(run)
    return result


def bench_stream(tmp: Path, total_bytes: int, command_bytes: int) -> list[dict[str, Any]]:
    """Section (c): the driver's peak RSS over a huge stream vs cat and a Python reader.

    Also the same kind of stream, smaller, through ``--agent command``.
    """
    runs = tmp / "runs-c"
    runs.mkdir()
    floor = _drive_stream(tmp, 0, runs)
    big = _drive_stream(tmp, total_bytes, runs)
    cat_s, cat_kib = _pipe_baseline(tmp, total_bytes, "cat")
    py_s, py_kib = _pipe_baseline(tmp, total_bytes, "py")
    mib = big["stdout_log_bytes"] / MIB
    peak = f"{big['peak_kib'] / 1024:.1f} MiB"
    rows = [
        _row(
            f"(c) driver peak RSS, {mib:,.0f} MiB claude stream",
            peak,
            f"cat {cat_kib / 1024:.1f} MiB",
            big["peak_kib"] / cat_kib if cat_kib else None,
            big,
        ),
        _row(
            "  same, against a Python json.loads reader",
            peak,
            f"py reader {py_kib / 1024:.1f} MiB",
            big["peak_kib"] / py_kib,
            {"py_reader_kib": py_kib},
        ),
        _row(
            "  same, against the driver on a 3-line stream",
            peak,
            f"driver {floor['peak_kib'] / 1024:.1f} MiB",
            big["peak_kib"] / floor["peak_kib"],
            floor,
        ),
        _row(
            "  wall time of that run (generator included)",
            f"{big['seconds']:.2f} s ({mib / big['seconds']:.0f} MiB/s)",
            f"cat {cat_s:.2f} s, py reader {py_s:.2f} s",
            big["seconds"] / cat_s,
            {"cat_s": cat_s, "py_reader_s": py_s},
        ),
    ]
    if command_bytes:
        same = _drive_stream(tmp, command_bytes, runs, "claude")
        plain = _drive_stream(tmp, command_bytes, runs, "command")
        size = f"{command_bytes / MIB:.0f} MiB"
        rows.append(
            _row(
                f"(c) {size} stream via --agent command: time",
                f"{plain['seconds']:.2f} s",
                f"via claude {same['seconds']:.2f} s",
                plain["seconds"] / same["seconds"],
                plain,
            )
        )
        rows.append(
            _row(
                f"(c) {size} stream via --agent command: peak RSS",
                f"{plain['peak_kib'] / 1024:.1f} MiB",
                f"via claude {same['peak_kib'] / 1024:.1f} MiB",
                plain["peak_kib"] / same["peak_kib"],
                same,
            )
        )
    return rows


# -- the table ---------------------------------------------------------------------


def _progress(row: dict[str, Any]) -> None:
    ratio = f"{row['ratio']:.2f}x" if row["ratio"] is not None else ""
    print(f"  {row['figure']}: {row['autopilot']} | {row['baseline']} | {ratio}", file=sys.stderr)


def format_table(rows: list[dict[str, Any]]) -> str:
    """The rows as a Markdown table (figure, autopilot, baseline, ratio)."""
    header = ("figure", "autopilot", "baseline (same run)", "ratio")
    cells = [header] + [
        (
            r["figure"],
            r["autopilot"],
            r["baseline"],
            f"{r['ratio']:.2f}x" if r["ratio"] is not None else "",
        )
        for r in rows
    ]
    widths = [max(len(c[i]) for c in cells) for i in range(4)]
    lines = ["| " + " | ".join(c[i].ljust(widths[i]) for i in range(4)) + " |" for c in cells]
    lines.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(lines)


def _git(*args: str) -> str:
    done = subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, check=False)
    return done.stdout.strip()


def _use_code(tmp: Path, rev: str | None) -> str:
    """Point this process and every child at the code to measure; return what it is.

    Raises:
        SystemExit: ``rev`` cannot be exported, or that code does not import.
    """
    if rev:
        sha = _git("rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")
        if not sha:
            raise SystemExit(f"core_bench: {rev} is not a commit")
        export = tmp / "code"
        export.mkdir()
        archive = subprocess.run(
            ["git", "archive", "--format=tar", sha, "src"],
            cwd=REPO,
            capture_output=True,
            check=True,
        )
        subprocess.run(["tar", "-x", "-C", str(export)], input=archive.stdout, check=True)
        os.environ[SRC_ENV] = str(export / "src")
        code = f"commit {sha[:7]} ({rev})"
    else:
        modified = " + uncommitted changes" if _git("status", "--porcelain", "--", "src") else ""
        code = f"working tree at {_git('rev-parse', '--short', 'HEAD') or '?'}{modified}"
    sys.path.insert(0, _src())
    check = subprocess.run(
        [sys.executable, "-c", "import autopilot.cli.main, autopilot.store.fold"],
        env=_child_env(),
        capture_output=True,
        text=True,
        check=False,
    )
    if check.returncode != 0:
        last = check.stderr.strip().splitlines()[-1:] or ["?"]
        raise SystemExit(
            f"core_bench: autopilot in {_src()} does not import ({last[0]}); "
            "measure a commit instead with --rev HEAD"
        )
    return code


def _machine(code: str) -> str:
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    return (
        f"autopilot {code}; Python {platform.python_version()}; "
        f"{platform.system()} {platform.machine()}, {os.cpu_count()} CPUs; "
        f"load average at the end {load}"
    )


def main() -> int:
    """Parse arguments, run the sections, print the table."""
    roles: dict[str, Callable[..., None]] = {
        "_measure": _role_measure,
        "_agent_stream": _role_agent_stream,
        "_py_reader": _role_py_reader,
        "_drive": _role_drive,
    }
    if len(sys.argv) > 1 and sys.argv[1] in roles:
        roles[sys.argv[1]](*sys.argv[2:])
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--quick",
        action="store_true",
        help="smoke run: 50 iterations, 100k events, 128 MiB, 1 repeat",
    )
    parser.add_argument("--only", default="abc", help="sections to run, e.g. 'a' or 'bc'")
    parser.add_argument("--iterations", type=int, help="(a) iterations (default 200)")
    parser.add_argument("--events", type=int, help="(b) events (default 1,000,000)")
    parser.add_argument("--stream-mib", type=int, help="(c) stream size (default 1024)")
    parser.add_argument(
        "--command-mib",
        type=int,
        help="(c) stream size through --agent command (default 32; 0 skips)",
    )
    parser.add_argument("--repeat", type=int, help="timings per figure, median (default 3)")
    parser.add_argument("--json", metavar="FILE", help="also write the raw results here")
    parser.add_argument("--keep", action="store_true", help="keep the temp directory")
    parser.add_argument(
        "--rev", help="measure this commit (exported with git archive) instead of the work tree"
    )
    args = parser.parse_args()
    quick = args.quick
    iterations = args.iterations or (50 if quick else 200)
    n_events = args.events or (100_000 if quick else 1_000_000)
    stream_bytes = (args.stream_mib or (128 if quick else 1024)) * MIB
    command_bytes = (8 if quick else 32) if args.command_mib is None else args.command_mib
    command_bytes *= MIB
    repeat = args.repeat or (1 if quick else 3)
    tmp = Path(tempfile.mkdtemp(prefix="autopilot-bench-"))
    rows: list[dict[str, Any]] = []
    code = "?"
    try:
        code = _use_code(tmp, args.rev)
        if "a" in args.only:
            print(f"(a) loop overhead, {iterations} iterations × {repeat}", file=sys.stderr)
            rows += bench_loop(tmp, iterations, repeat)
        if "b" in args.only:
            print(f"(b) folding {n_events:,} events × {repeat}", file=sys.stderr)
            rows += bench_fold(tmp, n_events, repeat)
        if "c" in args.only:
            print(f"(c) a {stream_bytes // MIB} MiB stream", file=sys.stderr)
            rows += bench_stream(tmp, stream_bytes, command_bytes)
    finally:
        if args.keep:
            print(f"kept {tmp}", file=sys.stderr)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    print(f"\n{_machine(code)}\n")
    print(format_table(rows))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
