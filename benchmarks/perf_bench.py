"""autopilot's speed targets, each against its baseline in the same run: one table.

Run ``python benchmarks/perf_bench.py`` (about ten minutes on a 2-core machine) or
``python benchmarks/perf_bench.py --quick`` (a smoke run of two or three minutes);
``--only startup,loop`` runs some sections; ``--rev HEAD`` measures a commit rather
than a work tree others may be editing. Every figure is timed in interleaved rounds
with its baseline (so a burst of load from other processes lands on both sides), the
table gives medians, the ratio, and the target the ratio is held to.

startup  ``--version``, ``status``, ``list``, ``pause``, ``resume``, ``stop``, ``send``
         and ``hook claude-stop`` (where it exists), each a whole process started
         the way the installed ``autopilot`` script starts, against ``python -c pass``
         of the same interpreter. A run is live throughout (its agent sleeps).
loop     ``autopilot run`` driving 100 iterations of a two-line shell agent, outside
         and inside a git repository, against a bash loop running the same agent
         (the output of both to ``/dev/null``; in the repository once more with
         autopilot's lines read through a pipe, shown without a target);
         also the git processes autopilot starts per iteration (counted by a ``git``
         on PATH that logs and passes on), and the floor of an iteration in a
         repository: the agent started from Python as a driver starts it here (as
         is where the run's sentinel watches its cgroup, else with ``setpriv``'s
         parent-death signal), one ``git status``, and the run's start and end
         shared among the iterations.
fold     the whole-log fold (what ``status`` runs) of a 1,000,000-event log, against
         ``json.loads`` of every line of the same file: time and peak RSS, each in a
         fresh process (``core_bench.py``'s measuring role).
many     ``list`` and ``stats`` over 10,000 runs, against ``python -c pass``; then 50
         runs at once (each 20 iterations of a one-second agent): all must end as
         asked with every event in its log; each driver's peak RSS and the CPU all
         drivers used.
watch    the live view's figures from ``watch_bench.py``: event to screen (median)
         and CPU on a quiet run.

It writes only inside one temp directory, removed at the end unless ``--keep``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))

import core_bench  # noqa: E402

AGENT_SCRIPT = "#!/bin/sh\necho 'Nothing to do here.'\n"
"""The trivial agent: two lines, as in the comparison with the tool autopilot replaces."""

Row = dict[str, Any]


# -- processes -------------------------------------------------------------------


def _env(tmp: Path, state_home: str = "state") -> dict[str, str]:
    """Children's environment: the measured code, the default runs root under ``tmp``
    (through ``XDG_STATE_HOME``, as a user without ``AUTOPILOT_RUNS_DIR`` has it),
    bytecode caching on."""
    env = core_bench._child_env()
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["XDG_STATE_HOME"] = str(tmp / state_home)
    env["XDG_CONFIG_HOME"] = str(tmp / "config")
    return env


def _launcher(tmp: Path) -> Path:
    """An ``autopilot`` script like the one pip installs (same template), calling the
    console entry of the code measured (``autopilot.launch``, or ``autopilot.cli.main``
    in code from before the entry answered Stop hooks itself)."""
    path = tmp / "bin" / "autopilot"
    path.parent.mkdir(exist_ok=True)
    path.write_text(
        f"#!{sys.executable}\n"
        "import re\nimport sys\n"
        "try:\n    from autopilot.launch import main\n"
        "except ImportError:\n    from autopilot.cli.main import main\n"
        "if __name__ == '__main__':\n"
        "    sys.argv[0] = re.sub(r'(-script\\.pyw|\\.exe)?$', '', sys.argv[0])\n"
        "    sys.exit(main())\n"
    )
    path.chmod(0o755)
    return path


def _run(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: dict[str, str],
    ok: Sequence[int] = (0,),
    stdout: int = subprocess.PIPE,
) -> None:
    """Run ``argv`` to its end; its stdout read through a pipe (or, as ``stdout``
    says, sent to ``/dev/null``), stderr read for the message of an exit not in ``ok``."""
    done = subprocess.run(
        argv, cwd=cwd, env=env, stdout=stdout, stderr=subprocess.PIPE, check=False
    )
    if done.returncode not in ok:
        raise SystemExit(
            f"{' '.join(argv)} exited {done.returncode}:\n{done.stderr.decode()[-2000:]}"
        )


def _medians(rounds: int, runs: Sequence[Callable[[], object]]) -> list[float]:
    """Median wall seconds of each callable over ``rounds`` interleaved rounds, every
    other round in the reverse order (so none always runs just after another)."""
    times: list[list[float]] = [[] for _ in runs]
    for round_number in range(rounds):
        order = list(enumerate(runs))
        for index, run_once in order if round_number % 2 == 0 else order[::-1]:
            started = time.perf_counter()
            run_once()
            times[index].append(time.perf_counter() - started)
    return [statistics.median(t) for t in times]


def _row(
    figure: str,
    autopilot: str,
    baseline: str = "",
    ratio: float | None = None,
    target: str = "",
    met: bool | None = None,
    raw: Any = None,
) -> Row:
    row = {"figure": figure, "autopilot": autopilot, "baseline": baseline, "ratio": ratio}
    row.update(target=target, met=met, raw=raw)
    mark = "" if met is None else (" ok" if met else " MISSED")
    shown = f"{ratio:.2f}x" if ratio is not None else ""
    print(f"  {figure}: {autopilot} | {baseline} | {shown} {target}{mark}", file=sys.stderr)
    return row


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


# -- startup ----------------------------------------------------------------------


def _has_command(launcher: Path, env: dict[str, str], name: str) -> bool:
    done = subprocess.run(
        [str(launcher), "--help"], env=env, capture_output=True, text=True, check=False
    )
    return re.search(rf"^\s+{re.escape(name)}\s", done.stdout, re.M) is not None


def bench_startup(tmp: Path, rounds: int, against: str | None = None) -> list[Row]:
    """Start-up of the everyday commands against ``python -c pass``; a run is live.
    With ``against``, that commit's commands too, in the same rounds (the same live
    run, driven by the code measured)."""
    env = _env(tmp)
    launcher = _launcher(tmp)
    old_env = None
    if against is not None:
        old_src = _export(tmp, against)
        old_env = dict(env, PYTHONPATH=os.pathsep.join([str(old_src), env.get("PYTHONPATH", "")]))
    project = tmp / "startup-project"
    project.mkdir()
    # A live run: one iteration whose agent sleeps until the end of this section.
    argv = [str(launcher), "run", "--agent", "command", "--max-iterations", "1", "-p", "x"]
    driver = subprocess.Popen(
        [*argv, "--", "sleep", "3600"],
        cwd=project,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    commands: list[tuple[str, list[str]]] = [
        ("--version", ["--version"]),
        ("status", ["status"]),
        ("list", ["list"]),
        ("pause", ["pause"]),
        ("resume", ["resume"]),
        ("stop", ["stop"]),
        ("send", ["send", "a note for the next iteration"]),
    ]
    missing = []
    if _has_command(launcher, env, "hook"):
        commands.append(("hook claude-stop (nothing armed)", ["hook", "claude-stop"]))
    else:
        missing.append("hook claude-stop")
    try:
        deadline = time.monotonic() + 60
        while subprocess.run(
            [str(launcher), "status"], cwd=project, env=env, capture_output=True, check=False
        ).returncode:
            if time.monotonic() > deadline or driver.poll() is not None:
                raise SystemExit("the live run for the start-up figures did not start")
            time.sleep(0.2)
        plain = tmp / "startup-elsewhere"  # for the hook: a directory with nothing armed
        plain.mkdir()

        def command(args: list[str], env: dict[str, str] = env) -> Callable[[], None]:
            cwd = plain if args[0] == "hook" else project
            return lambda: _run([str(launcher), *args], cwd=cwd, env=env)

        runs = [lambda: _run([sys.executable, "-c", "pass"], cwd=project, env=env)]
        runs += [command(args) for _, args in commands]
        if old_env is not None:
            runs += [command(args, old_env) for _, args in commands]
        for warm in runs:  # bytecode written, caches warm
            warm()
        medians = _medians(rounds, runs)
    finally:
        subprocess.run(
            [str(launcher), "stop", "--now"], cwd=project, env=env, capture_output=True, check=False
        )
        try:
            driver.wait(60)
        except subprocess.TimeoutExpired:
            driver.kill()
            driver.wait()
    base, *took_all = medians
    named = [(name, "") for name, _ in commands]
    if old_env is not None:
        before = [(name, f" at {against}") for name, _ in commands]
        named = [pair for now, then in zip(named, before, strict=True) for pair in (then, now)]
        count = len(commands)
        took_all = [t for i in range(count) for t in (took_all[count + i], took_all[i])]
    rows = [
        _row(
            f"startup: autopilot {name}{at}",
            _ms(took),
            f"python -c pass {_ms(base)}",
            took / base,
            "≤ 4x",
            took / base <= 4,
            {"seconds": took, "python_s": base},
        )
        for (name, at), took in zip(named, took_all, strict=True)
    ]
    rows += [
        _row(f"startup: autopilot {name}", "not built yet", "", None, "≤ 4x") for name in missing
    ]
    return rows


# -- loop -------------------------------------------------------------------------


def _git_counter(tmp: Path) -> tuple[Path, Path]:
    """A folder with a ``git`` that logs each call, then runs the real one."""
    real = shutil.which("git")
    if real is None:
        raise SystemExit("git is not installed")
    folder = tmp / "git-counter"
    folder.mkdir()
    log = tmp / "git-calls.log"
    script = folder / "git"
    script.write_text(f"#!/bin/sh\necho \"$*\" >> '{log}'\nexec '{real}' \"$@\"\n")
    script.chmod(0o755)
    return folder, log


_CHECKPOINT_CALLS = ("add", "write-tree", "diff-tree", "commit-tree", "update-ref")


def _git_subcommand(line: str) -> str:
    """The subcommand of a logged ``git`` call (the word after its options)."""
    words = line.split()
    index = 0
    while index < len(words) and words[index].startswith("-"):
        index += 2 if words[index] in ("-c", "-C") else 1
    return words[index] if index < len(words) else ""


def _export(tmp: Path, rev: str) -> Path:
    """The ``src`` folder of commit ``rev``, exported under ``tmp``."""
    export = tmp / f"against-{len(list(tmp.glob('against-*')))}"
    export.mkdir()
    archive = subprocess.run(
        ["git", "archive", "--format=tar", rev, "src"],
        cwd=BENCH_DIR.parent,
        capture_output=True,
        check=False,
    )
    if archive.returncode != 0:
        raise SystemExit(f"perf_bench: cannot export {rev}: {archive.stderr.decode().strip()}")
    subprocess.run(["tar", "-x", "-C", str(export)], input=archive.stdout, check=True)
    return export / "src"


def bench_loop(tmp: Path, iterations: int, rounds: int, against: str | None = None) -> list[Row]:
    """``autopilot run`` over N iterations of a trivial agent against a bash loop; with
    ``against``, that commit's ``autopilot run`` too, in the same interleaved rounds."""
    env = _env(tmp, "loop-state")
    launcher = _launcher(tmp)
    agent = tmp / "agent.sh"
    agent.write_text(AGENT_SCRIPT)
    agent.chmod(0o755)
    plain = tmp / "loop-plain"
    plain.mkdir()
    repo = tmp / "loop-git"
    core_bench._make_git_repo(repo)
    runs_root = tmp / "loop-state" / "autopilot" / "runs"
    argv = [str(launcher), "run", "--agent", "command", "--max-iterations", str(iterations)]
    argv += ["--stagnation-limit", "0", "--completion-promise", "NEVERSAID", "-p", "x"]
    argv += ["--", str(agent)]
    counter, calls = _git_counter(tmp)
    old_env = None
    if against is not None:
        old_src = _export(tmp, against)
        old_env = dict(env, PYTHONPATH=os.pathsep.join([str(old_src), env.get("PYTHONPATH", "")]))
    rows = []
    # Both loops' output goes to /dev/null: the bash loop's agent's, and autopilot's
    # plain view (its lines are formatted and written all the same). A pipe this
    # process read would put its reads on the machine's cores too (a row below).
    quiet = subprocess.DEVNULL
    for title, cwd in (("outside a git repository", plain), ("in a git repository", repo)):
        runs: list[Callable[[], object]] = [
            lambda cwd=cwd: core_bench._bash_loop(iterations, [str(agent)], cwd),
            lambda cwd=cwd: _run(argv, cwd=cwd, env=env, ok=(3,), stdout=quiet),
        ]
        if old_env is not None:
            runs.append(lambda cwd=cwd: _run(argv, cwd=cwd, env=old_env, ok=(3,), stdout=quiet))
        inside = cwd == repo
        if inside:  # the view's lines read through a pipe, as a log collector reads them
            runs.append(lambda cwd=cwd: _run(argv, cwd=cwd, env=env, ok=(3,)))
        bare, driven, *others = _medians(rounds, runs)
        old, piped = (others[:-1], others[-1]) if inside else (others, None)
        core_bench._check_loop_runs(runs_root, iterations)
        for took in old:
            rows.append(
                _row(
                    f"loop: {iterations} iterations, {title}, at {against}",
                    f"{took:.2f} s ({took / iterations * 1000:.1f} ms/it)",
                    f"bash loop {bare:.3f} s ({bare / iterations * 1000:.2f} ms/it)",
                    took / bare,
                    "(before)",
                    None,
                    {"autopilot_s": took, "bash_s": bare, "iterations": iterations},
                )
            )
        rows.append(
            _row(
                f"loop: {iterations} iterations, {title}",
                f"{driven:.2f} s ({driven / iterations * 1000:.1f} ms/it)",
                f"bash loop {bare:.3f} s ({bare / iterations * 1000:.2f} ms/it)",
                driven / bare,
                "≤ 6x",
                driven / bare <= 6,
                {"autopilot_s": driven, "bash_s": bare, "iterations": iterations},
            )
        )
        if piped is not None:
            rows.append(
                _row(
                    f"loop: {iterations} iterations, {title}, its lines read through a pipe",
                    f"{piped:.2f} s ({piped / iterations * 1000:.1f} ms/it)",
                    f"bash loop {bare:.3f} s ({bare / iterations * 1000:.2f} ms/it)",
                    piped / bare,
                    "(shown)",
                    None,
                    {"autopilot_s": piped, "bash_s": bare, "iterations": iterations},
                )
            )
        calls.unlink(missing_ok=True)
        counted = dict(env, PATH=f"{counter}{os.pathsep}{env.get('PATH', '')}")
        _run([*argv[:5], "10", *argv[6:]], cwd=cwd, env=counted, ok=(3,))
        core_bench._check_loop_runs(runs_root, 10)
        lines = calls.read_text().splitlines() if calls.exists() else []
        per = len(lines) / 10
        words = [_git_subcommand(line) for line in lines]
        # At most one mark an iteration (its end mark opens the next), and the opening
        # mark (the baseline's, then the first iteration's start); none while the tree
        # watch vouches that nothing touched the tree (``workspace.tree_watch``).
        marks = words.count("status") / 10
        # The baseline is taken; the agent changes nothing, so every iteration shares
        # it and starts no checkpoint process.
        taken = [i for i, w in enumerate(words) if w == "update-ref"]
        later = words[taken[0] + 1 :] if taken else words
        checkpoint = sum(w in _CHECKPOINT_CALLS for w in later) / 10
        rows.append(
            _row(
                f"loop: git processes per iteration, {title}",
                f"{per:.1f} ({len(lines)} for 10 iterations and the run's start): "
                f"{marks:.1f} for the marks, {checkpoint:.1f} for the checkpoint of "
                "an unchanged tree",
                "",
                None,
                "at most one mark an iteration, none for an unchanged tree's checkpoint"
                if inside
                else "0",
                (marks <= 1.1 and checkpoint == 0) if inside else not lines,
                {"calls": lines},
            )
        )
    return rows + _loop_floor(repo, agent, argv, env, iterations, rounds)


_MARK_ARGV = ["git", "--no-optional-locks", "status", "--porcelain=v2", "-z", "--branch"]
_MARK_ARGV += ["--no-ahead-behind"]
_MARK_ARGV += ["--untracked-files=all"]
"""The git call of one mark (``workspace.git``), without the ``-c`` options."""


def _sentinel_here(env: dict[str, str]) -> bool:
    """Does a run here get a cgroup with ``cgroup.kill``, so that its sentinel, not
    ``setpriv``, ends its agent with the driver (``loop.sentinel``)?"""
    from autopilot.loop.cgroup import AgentCgroup

    probe = AgentCgroup.for_run(f"bench-probe-{os.getpid()}", env)
    if probe is None:
        return False
    try:
        return os.access(probe.path / "cgroup.kill", os.W_OK)
    finally:
        probe.remove()


def _loop_floor(
    repo: Path, agent: Path, argv: list[str], env: dict[str, str], iterations: int, rounds: int
) -> list[Row]:
    """What one iteration in a git repository costs before the loop's own work: the
    agent started from Python as a driver starts it here (as is where the run's
    sentinel watches its cgroup, ``loop.sentinel``; else with its parent-death signal,
    by ``setpriv``), the mark's one ``git status``, and the run's start and end shared
    among the iterations; each against the bash loop's iteration."""
    setpriv = shutil.which("setpriv")
    spawns = 200
    quiet = subprocess.DEVNULL

    def each(command: list[str]) -> Callable[[], object]:
        def spawn_all() -> None:
            for _ in range(spawns):
                subprocess.run(
                    command,
                    cwd=repo,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    check=True,
                )

        return spawn_all

    runs: list[Callable[[], object]] = [
        lambda: core_bench._bash_loop(spawns, [str(agent)], repo),
        each([str(agent)]),
        each(_MARK_ARGV),
        lambda: _run([*argv[:5], "1", *argv[6:]], cwd=repo, env=env, ok=(3,), stdout=quiet),
    ]
    if setpriv:
        runs.append(each([setpriv, "--pdeathsig", "KILL", "--", str(agent)]))
    bare, spawned, mark, one_run, *guarded = (t / spawns for t in _medians(rounds, runs))
    one_run *= spawns  # one whole run of one iteration
    agent_cost = guarded[0] if guarded and not _sentinel_here(env) else spawned
    shared = (one_run - agent_cost - mark) / iterations
    floor = agent_cost + mark + shared
    bash = f"bash loop {bare * 1000:.2f} ms/it"
    title = "loop floor: the agent started from Python (a run's sentinel watching its cgroup)"
    rows = [_row(title, _ms(spawned), bash, spawned / bare)]
    if guarded:
        title = "loop floor: the agent started with a parent-death signal (setpriv; no sentinel)"
        rows.append(_row(title, _ms(guarded[0]), bash, guarded[0] / bare))
    title = "loop floor: one git status (a mark the tree watch cannot vouch for)"
    rows.append(_row(title, _ms(mark), bash, mark / bare))
    rows.append(
        _row(
            f"loop floor: the run's start and end, shared by {iterations} iterations",
            f"{_ms(shared)} ({_ms(one_run)} for a run of one iteration)",
            bash,
            shared / bare,
        )
    )
    rows.append(
        _row(
            "loop floor: in a git repository, every mark a git status, before the loop's own work",
            f"{_ms(floor)} an iteration",
            bash,
            floor / bare,
            f"≤ 6x leaves the loop {max(6 * bare - floor, 0) * 1000:.2f} ms an iteration",
        )
    )
    return rows


# -- fold -------------------------------------------------------------------------


def bench_fold(tmp: Path, n_events: int, rounds: int) -> list[Row]:
    """The streaming fold of a big log against ``json.loads`` per line, each in a fresh
    process; medians of time and of peak RSS."""
    path = tmp / "events.jsonl"
    started = time.perf_counter()
    written, size = core_bench.write_log(path, n_events)
    print(
        f"  (generated {written:,} events, {size / 1e6:.0f} MB, "
        f"in {time.perf_counter() - started:.1f} s)",
        file=sys.stderr,
    )
    results: dict[str, list[dict[str, Any]]] = {"json": [], "fold": []}
    for _ in range(rounds):
        for kind, measured in results.items():
            measured.append(core_bench._measure(kind, path))
    snap = results["fold"][0]["detail"]
    if snap["status"] != "complete":
        raise SystemExit(f"fold gave an unexpected snapshot: {snap}")
    seconds = {k: statistics.median(r["seconds"] for r in v) for k, v in results.items()}
    peak = {k: statistics.median(r["peak_kib"] for r in v) / 1024 for k, v in results.items()}
    time_ratio = seconds["fold"] / seconds["json"]
    rss_ratio = peak["fold"] / peak["json"]
    return [
        _row(
            f"fold: {written:,} events ({size / 1e6:.0f} MB), time",
            f"{seconds['fold']:.2f} s ({seconds['fold'] / written * 1e6:.2f} µs/event)",
            f"json.loads per line {seconds['json']:.2f} s",
            time_ratio,
            "≤ 0.7x",
            time_ratio <= 0.7,
            results,
        ),
        _row(
            "fold: peak RSS",
            f"{peak['fold']:.1f} MiB",
            f"json.loads per line {peak['json']:.1f} MiB",
            rss_ratio,
            "≤ 1.5x",
            rss_ratio <= 1.5,
        ),
    ]


# -- many runs ----------------------------------------------------------------------


def _check_concurrent_run(folder: Path, iterations: int) -> str | None:
    """Why a run of the concurrent figure is not what was asked (None: it is)."""
    from autopilot.store.events import parse_event_line

    lines = (folder / "events.jsonl").read_bytes().splitlines()
    events = [parse_event_line(line) for line in lines]
    if None in events:
        return "a line of its log does not parse"
    starts = [e["iteration"] for e in events if e and e["type"] == "iteration_start"]
    ends = [e for e in events if e and e["type"] == "iteration_end"]
    terminal = [e for e in events if e and e["type"] in ("complete", "abort")]
    state = json.loads((folder / "state.json").read_text())
    if starts != list(range(1, iterations + 1)) or len(ends) != iterations:
        return f"iterations started {starts}, ended {len(ends)}"
    if [e.get("outcome") for e in ends] != ["ok"] * iterations:
        return "an iteration did not end ok"
    if len(terminal) != 1 or terminal[0].get("reason") != "max_iterations":
        return f"terminal events {terminal}"
    spent = (state.get("spend") or {}).get("iterations")
    if state.get("iter") != iterations or spent != iterations:
        return f"state.json says iteration {state.get('iter')}"
    return None


def bench_many(
    tmp: Path,
    runs: int,
    concurrent: int,
    iterations: int,
    rounds: int,
    against: str | None = None,
) -> list[Row]:
    """``list``/``stats`` over many runs (with ``against``, that commit's too, in the
    same rounds, over a copy of the same runs); many runs at once (none when
    ``concurrent`` is 0)."""
    import watch_bench

    env = _env(tmp, "many-state")
    launcher = _launcher(tmp)
    root = tmp / "many-state" / "autopilot" / "runs"
    watch_bench.make_many_runs(root, runs)
    commands = [["list"], ["stats"]]
    every = [lambda: _run([sys.executable, "-c", "pass"], cwd=tmp, env=env)]
    every += [lambda args=args: _run([str(launcher), *args], cwd=tmp, env=env) for args in commands]
    if against is not None:  # its own copy: each keeps its own finished.json
        old_src = _export(tmp, against)
        shutil.copytree(tmp / "many-state", tmp / "many-state-before", symlinks=True)
        old_env = _env(tmp, "many-state-before")
        old_env["PYTHONPATH"] = os.pathsep.join([str(old_src), env.get("PYTHONPATH", "")])
        every += [
            lambda args=args: _run([str(launcher), *args], cwd=tmp, env=old_env)
            for args in commands
        ]
    for warm in every:
        warm()
    base, *took = _medians(rounds, every)
    rows = []
    for index, args in enumerate(commands):
        figures = [(f"at {against}", took[index + len(commands)])] if against else []
        figures.append(("", took[index]))
        rows += [
            _row(
                f"many: autopilot {' '.join(args)} over {runs:,} runs{' ' if at else ''}{at}",
                _ms(seconds),
                f"python -c pass {_ms(base)}",
                seconds / base,
                "≤ 10x",
                seconds / base <= 10,
            )
            for at, seconds in figures
        ]
    if concurrent == 0:
        return rows

    env = _env(tmp, "concurrent-state")
    root = tmp / "concurrent-state" / "autopilot" / "runs"
    agent = tmp / "one-second-agent.sh"
    agent.write_text("#!/bin/sh\nsleep 1\necho 'Worked for a second.'\n")
    agent.chmod(0o755)
    argv = ["run", "--agent", "command", "--max-iterations", str(iterations)]
    argv += ["--stagnation-limit", "0", "--completion-promise", "NEVERSAID", "-p", "x"]
    argv += ["--", str(agent)]
    reports = []
    drivers = []
    started = time.perf_counter()
    for index in range(concurrent):
        project = tmp / f"concurrent-{index:02d}"
        project.mkdir()
        report = tmp / f"concurrent-{index:02d}.json"
        reports.append(report)
        drivers.append(
            subprocess.Popen(
                [sys.executable, str(BENCH_DIR / "drive_role.py"), str(report), *argv],
                cwd=project,
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
            )
        )
    codes = [driver.wait() for driver in drivers]
    wall = time.perf_counter() - started
    for driver in drivers:
        assert driver.stderr is not None
        driver.stderr.close()
    problems = {
        folder.name: why
        for folder in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
        if (why := _check_concurrent_run(folder, iterations)) is not None
    }
    complete = sum(code == 3 for code in codes) - len(problems)
    measured = [json.loads(r.read_text()) for r in reports if r.exists()]
    peaks = sorted(m["peak_kib"] / 1024 for m in measured)
    cpu = sum(m["cpu_s"] for m in measured)
    ideal = iterations * 1.0
    rows += [
        _row(
            f"many: {concurrent} runs at once, {iterations} iterations of a 1 s agent each",
            f"{complete}/{concurrent} complete, every event logged; all done in {wall:.1f} s",
            f"one run alone: at least {ideal:.0f} s",
            wall / ideal,
            f"all {concurrent}",
            complete == concurrent and not problems,
            {"codes": codes, "problems": problems},
        ),
        _row(
            "many: each driver's peak RSS (no live view)",
            f"median {statistics.median(peaks):.1f} MiB, max {peaks[-1]:.1f} MiB",
            "",
            None,
            "aim ≤ 25 MB",
            peaks[-1] * 1.048576 <= 25,
            peaks,
        ),
        _row(
            "many: CPU of all drivers",
            f"{cpu:.1f} s ({cpu / (concurrent * iterations) * 1000:.1f} ms per iteration)",
            f"over {wall:.1f} s on {os.cpu_count()} cores",
            None,
            "",
            None,
        ),
    ]
    return rows


# -- the live view -------------------------------------------------------------------


def bench_watch(quick: bool) -> list[Row]:
    """The live view's latency and idle CPU, from ``watch_bench.py``."""
    argv = [sys.executable, str(BENCH_DIR / "watch_bench.py"), "--only", "latency", "--only", "cpu"]
    if quick:
        argv.append("--quick")
    done = subprocess.run(
        argv, capture_output=True, text=True, env=core_bench._child_env(), check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"watch_bench.py failed:\n{done.stderr[-2000:]}")
    rows = []
    for line in done.stdout.splitlines():
        cells = [c for c in re.split(r"\s{2,}", line.strip()) if c]
        if line.startswith("append → on screen, median") and len(cells) >= 3:
            took = float(cells[1].split()[0])
            rows.append(
                _row(
                    "watch: event appended → on screen, median",
                    cells[1],
                    f"file notification {cells[2]}",
                    None,
                    "< 100 ms",
                    took < 100,
                )
            )
        elif line.startswith("watch CPU over") and len(cells) >= 3:
            share = float(re.findall(r"\(([\d.]+)% of a core\)", cells[1])[0])
            rows.append(
                _row(
                    f"watch: {cells[0]}",
                    cells[1],
                    f"a minimal Textual app {cells[2]}",
                    None,
                    "< 1% of a core",
                    share < 1,
                )
            )
        elif line.startswith("watch CPU") and "skipped" in line:
            rows.append(_row("watch: CPU on a quiet run", "skipped (no tmux)", "", None, "< 1%"))
    return rows


# -- the table ----------------------------------------------------------------------


def format_table(rows: list[Row]) -> str:
    """The rows as a Markdown table."""
    header = ("figure", "autopilot", "baseline (same run)", "ratio", "target", "")
    cells = [header] + [
        (
            r["figure"],
            r["autopilot"],
            r["baseline"],
            f"{r['ratio']:.2f}x" if r["ratio"] is not None else "",
            r["target"],
            "" if r["met"] is None else ("met" if r["met"] else "MISSED"),
        )
        for r in rows
    ]
    widths = [max(len(c[i]) for c in cells) for i in range(len(header))]
    lines = ["| " + " | ".join(c[i].ljust(w) for i, w in enumerate(widths)) + " |" for c in cells]
    lines.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(lines)


def main() -> int:
    """Parse arguments, run the sections, print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes, fewer rounds")
    parser.add_argument(
        "--only", default="startup,loop,fold,many,watch", help="comma-separated sections"
    )
    parser.add_argument("--rounds", type=int, help="timed rounds per figure (default 11, quick 3)")
    parser.add_argument("--json", metavar="FILE", help="also write the raw results here")
    parser.add_argument("--keep", action="store_true", help="keep the temp directory")
    parser.add_argument("--rev", help="measure this commit instead of the work tree")
    parser.add_argument(
        "--against",
        metavar="REV",
        help="startup, loop, many: also time this commit in the same rounds (before/after)",
    )
    parser.add_argument(
        "--at-once",
        type=int,
        metavar="N",
        help="many: how many runs go at once (default 50, quick 10; 0: only list and stats)",
    )
    args = parser.parse_args()
    quick = args.quick
    rounds = args.rounds or (3 if quick else 11)
    only = set(args.only.split(","))
    tmp = Path(tempfile.mkdtemp(prefix="autopilot-perf-"))
    load_before = os.getloadavg()
    rows: list[Row] = []
    try:
        code = core_bench._use_code(tmp, args.rev)
        sections: list[tuple[str, Callable[[], list[Row]]]] = [
            ("startup", lambda: bench_startup(tmp, rounds, against=args.against)),
            (
                "loop",
                lambda: bench_loop(
                    tmp, 30 if quick else 100, max(3, rounds // 2), against=args.against
                ),
            ),
            ("fold", lambda: bench_fold(tmp, 100_000 if quick else 1_000_000, 3)),
            (
                "many",
                lambda: bench_many(
                    tmp,
                    1_000 if quick else 10_000,
                    (10 if quick else 50) if args.at_once is None else args.at_once,
                    5 if quick else 20,
                    max(3, rounds // 2),
                    against=args.against,
                ),
            ),
            ("watch", lambda: bench_watch(quick)),
        ]
        for name, measure in sections:
            if name in only:
                print(f"{name}…", file=sys.stderr, flush=True)
                rows += measure()
    finally:
        if args.keep:
            print(f"kept {tmp}", file=sys.stderr)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    load = ", ".join(f"{x:.2f}" for x in load_before)
    print(
        f"\n{core_bench._machine(code)}; load average at the start {load}; "
        f"medians of {rounds} interleaved rounds ({platform.node() or 'this machine'})\n"
    )
    print(format_table(rows))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2, default=str) + "\n")
    missed = [r["figure"] for r in rows if r["met"] is False]
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
