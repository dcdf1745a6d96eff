"""End-to-end fixtures: the real agent CLIs (pinned in ``tests/e2e/package.json``,
installed by ``scripts/test.sh``) driven by ``autopilot run`` against the project's
scripted model server, inside a private network namespace where the machine allows.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import psutil
import pytest

from autopilot.testkit.model_server import INPUT_TOKENS, OUTPUT_TOKENS
from autopilot.testkit.model_server.routes import post_route
from autopilot.testkit.offline import netns_prefix
from tests.conftest import init_repo, read_jsonl

E2E_BIN_ENV = "AUTOPILOT_E2E_BIN_DIR"
# Read at import: the suite's autouse fixture removes AUTOPILOT_* variables per test.
_BIN_DIR_AT_IMPORT = os.environ.get(E2E_BIN_ENV)


def cli_path(name: str) -> Path:
    """The pinned CLI's executable; fails (never skips) when it is not installed."""
    bin_dir = (
        os.environ.get(E2E_BIN_ENV)
        or _BIN_DIR_AT_IMPORT
        or str(Path.home() / ".cache" / "autopilot-e2e" / "node_modules" / ".bin")
    )
    path = Path(bin_dir) / name
    if not path.exists():
        if os.environ.get("AUTOPILOT_SKIP_E2E") == "1":
            pytest.skip("AUTOPILOT_SKIP_E2E=1")
        pytest.fail(f"{path} is missing: run 'bash scripts/test.sh' (it installs the agent CLIs)")
    return path


@dataclass
class E2ERun:
    """The outcome of one ``autopilot run`` under the offline runner."""

    returncode: int
    stdout: str
    stderr: str
    run_dir: Path
    requests: list[dict[str, Any]]

    @property
    def events(self) -> list[dict[str, Any]]:
        return read_jsonl(self.run_dir / "events.jsonl")

    @property
    def state(self) -> dict[str, Any]:
        import json

        loaded: dict[str, Any] = json.loads((self.run_dir / "state.json").read_text())
        return loaded


def sent_prompt(run: E2ERun, iteration: int = 1) -> str:
    """The prompt autopilot sent in ``iteration``: the run's prompt, then the memory
    file's paragraph (and any messages)."""
    return (run.run_dir / f"iter-{iteration:04d}" / "prompt.md").read_text()


@pytest.fixture
def e2e_repo(tmp_path: Path) -> Path:
    """A fresh git repository for the agent to work in."""
    return init_repo(tmp_path / "work", user="e2e", readme="e2e\n")


def under_model_server(
    script: str,
    command: Sequence[str],
    *,
    cwd: Path,
    env: dict[str, str],
    timeout: float,
    set_env: Mapping[str, str],
    templates: Mapping[Path, Path],
    fail_for_seconds: float | None = None,
    requests_file: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    """``command`` run by ``autopilot.testkit.offline`` with the scripted model server
    on ``script``, in a private network namespace where the machine allows one.

    ``set_env`` is given to ``command`` with ``{port}`` and ``{base_url}`` replaced by
    the server's; ``templates`` maps a config file template to where it goes (the same
    replacements); ``fail_for_seconds`` answers 429 for that long from the first model
    request; ``requests_file`` records every request the server answered.
    """
    argv = [sys.executable, "-m", "autopilot.testkit.offline", "--script", script]
    if netns_prefix() is not None:
        argv.append("--netns")
    if requests_file is not None:
        argv += ["--requests-file", str(requests_file)]
    for key, value in set_env.items():
        argv += ["--set-env", f"{key}={value}"]
    for source, destination in templates.items():
        argv += ["--template", f"{source}={destination}"]
    if fail_for_seconds is not None:
        argv += ["--fail-for-seconds", str(fail_for_seconds)]
    return subprocess.run(
        [*argv, "--", *command],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
        check=False,
    )


def run_offline(
    tmp_path: Path,
    repo: Path,
    *,
    script: str,
    autopilot_args: list[str],
    set_env: dict[str, str],
    timeout: float = 600,
    templates: dict[Path, Path] | None = None,
    fail_for_seconds: float | None = None,
    unset_env: Sequence[str] = (),
    runs_made: int = 1,
) -> E2ERun:
    """``autopilot ARGS`` in ``repo`` with the model server running ``script``.

    ``runs_made`` runs are expected (a parallel run and its lanes); the result's
    ``run_dir`` is the first by name (a parallel run before its lanes).

    ``templates`` maps a config file template to where it goes, with ``{port}`` and
    ``{base_url}`` replaced by the server's (known only inside the runner).
    ``fail_for_seconds`` answers 429 (resetting then) for that long from the start.
    ``unset_env`` names variables of this environment the CLI must not see.
    """
    runs_root = tmp_path / "runs"
    requests_file = tmp_path / "requests.jsonl"
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env = dict(os.environ, HOME=str(home), AUTOPILOT_RUNS_DIR=str(runs_root))
    env.pop("CLAUDECODE", None)
    for key in unset_env:
        env.pop(key, None)
    done = under_model_server(
        script,
        [sys.executable, "-m", "autopilot", *autopilot_args],
        cwd=repo,
        env=env,
        timeout=timeout,
        set_env=set_env,
        templates=templates or {},
        fail_for_seconds=fail_for_seconds,
        requests_file=requests_file,
    )
    runs = (
        sorted(
            p
            for p in runs_root.iterdir()
            if p.is_dir() and not p.name.startswith(".") and p.name != "worktrees"
        )
        if runs_root.is_dir()
        else []
    )
    assert len(runs) == runs_made, (done.stdout, done.stderr)
    requests = read_jsonl(requests_file) if requests_file.exists() else []
    return E2ERun(done.returncode, done.stdout, done.stderr, runs[0], requests)


def assert_nothing_left_behind(repo: Path, grace_seconds: float = 2.0) -> None:
    """No process is left running in the repository, nor any with the run's ``HOME``
    (``run_offline`` gives the agent CLI ``HOME=<tmp>/home``, beside the repository,
    and every helper it starts inherits it, whatever its cwd).

    Processes get ``grace_seconds`` to finish exiting.
    """
    home = str(repo.parent / "home")
    deadline = time.monotonic() + grace_seconds
    while True:
        left = []
        for process in psutil.process_iter(["pid", "cwd", "cmdline"]):
            try:
                in_repo = bool(process.info["cwd"]) and Path(process.info["cwd"]) == repo
                if in_repo or (
                    process.pid != os.getpid() and process.environ().get("HOME") == home
                ):
                    left.append(process.info)
            except psutil.Error:
                continue
        if not left or time.monotonic() >= deadline:
            break
        time.sleep(0.2)
    assert left == [], left


def argv_recorder(tmp_path: Path, real: Path) -> tuple[Path, Path]:
    """A wrapper that records every argv it is started with, then execs ``real``.

    Returns the wrapper (for ``AUTOPILOT_<NAME>_BIN``) and the folder holding one
    NUL-separated argv file per start (read them with :func:`recorded_argvs`). ``exec``
    keeps the pid, so the driver still watches the real CLI.
    """
    folder = tmp_path / "argv"
    folder.mkdir(exist_ok=True)
    wrapper = tmp_path / f"record-{real.name}"
    wrapper.write_text(
        "#!/bin/sh\n"
        f'f={shlex.quote(str(folder))}/"$(date +%s%N)-$$"\n'
        'printf \'%s\\0\' "$@" > "$f"\n'
        f'exec {shlex.quote(str(real))} "$@"\n'
    )
    wrapper.chmod(0o755)
    return wrapper, folder


def recorded_argvs(folder: Path) -> list[list[str]]:
    """The argvs :func:`argv_recorder` saw, oldest first (program name left out)."""
    files = sorted(folder.iterdir(), key=lambda p: int(p.name.split("-")[0]))
    return [p.read_bytes().decode().split("\0")[:-1] for p in files]


def iteration_ends(run: E2ERun) -> list[dict[str, Any]]:
    """The run's ``iteration_end`` events, in order."""
    return [e for e in run.events if e["type"] == "iteration_end"]


def terminal(run: E2ERun) -> list[tuple[object, object]]:
    """``(type, reason)`` of the run's complete/abort events."""
    return [(e["type"], e["reason"]) for e in run.events if e["type"] in ("complete", "abort")]


def model_calls(run: E2ERun) -> int:
    """Requests that offered tools: the agent's own model calls, side calls left out."""
    count = 0
    for request in run.requests:
        route = post_route(urlsplit(str(request["path"])).path.rstrip("/"))
        body = request["body"]
        if route is None or route.count_tokens or not isinstance(body, dict):
            continue
        if not route.wire.conversation(body).is_side_call:
            count += 1
    return count


def assert_only_model_api(run: E2ERun, prefixes: Sequence[str]) -> None:
    """Every request the server saw went to the CLI's model API (and it saw some);
    ``HEAD`` requests (Claude Code's reachability check) aside."""
    paths = [str(r["path"]) for r in run.requests if r["method"] != "HEAD"]
    assert paths, "the CLI never reached the model server"
    assert [p for p in paths if not p.startswith(tuple(prefixes))] == []


def assert_spend_agrees(run: E2ERun, *, per_call_usage: bool, cost: bool) -> None:
    """``iteration_end`` events, ``usage_update`` events and ``state.json`` agree.

    Tokens of the iterations add up to the run's; with ``per_call_usage`` (the CLI
    reports what the server answered, once per call) they are exactly the server's
    fixed usage times the model calls made. With ``cost`` the CLI reports a
    positive cost and the iterations' costs add up to the run's; without it the
    run's cost is 0.
    """
    ends = iteration_ends(run)
    spend = run.state["spend"]
    assert isinstance(spend, dict)
    tokens = spend["tokens"]
    assert tokens == ends[-1]["tokens"]
    summed = {key: sum(int(e["iterationTokens"][key]) for e in ends) for key in ("input", "output")}
    assert summed == tokens
    complete = [e for e in run.events if e["type"] in ("complete", "abort")]
    assert complete[-1]["tokens"] == tokens
    if per_call_usage:
        calls = model_calls(run)
        assert tokens == {"input": calls * INPUT_TOKENS, "output": calls * OUTPUT_TOKENS}
    updates = [e for e in run.events if e["type"] == "usage_update"]
    if updates:
        assert updates[-1]["tokens"] == tokens
    if cost:
        costs = [float(e["iterationCostUsd"]) for e in ends]
        assert all(c > 0 for c in costs)
        assert float(spend["costUsd"]) == pytest.approx(sum(costs), abs=1e-6)
        assert float(spend["costUsd"]) == pytest.approx(float(ends[-1]["costUsd"]))
    else:
        assert float(spend["costUsd"]) == 0


def assert_completed_at_two(run: E2ERun, repo: Path) -> list[dict[str, Any]]:
    """The run completed by promise at iteration 2, state and events agreeing.

    Returns the ``iteration_end`` events.
    """
    assert run.returncode == 0, run.stdout + run.stderr
    assert terminal(run) == [("complete", "completion_promise")], run.stdout
    ends = iteration_ends(run)
    assert [e["iteration"] for e in ends] == [1, 2], run.stdout
    assert [e["outcome"] for e in ends] == ["ok", "ok"]
    state = run.state
    assert state["terminated"] is True
    assert state["terminationReason"] == "completion_promise"
    assert state["status"] == "completed"
    assert state["iter"] == 2
    spend = state["spend"]
    assert isinstance(spend, dict)
    assert spend["iterations"] == 2
    assert "hello from the fake model" in (repo / "hello.txt").read_text()
    return ends


def assert_auth_halt(run: E2ERun, own_words: str) -> None:
    """One iteration, an agent error, then an abort at once with the agent's words."""
    assert run.returncode == 1, run.stdout + run.stderr
    ends = iteration_ends(run)
    assert len(ends) == 1, run.stdout
    assert ends[0]["outcome"] == "agent_error"
    assert terminal(run) == [("abort", "agent_failing")]
    last = run.events[-1]
    assert last["type"] == "abort"
    assert own_words in str(last["note"]), last["note"]
    assert own_words in str(run.state["terminationNote"])
    spend = run.state["spend"]
    assert isinstance(spend, dict) and spend["iterations"] == 1


def assert_recovered_on_its_own(run: E2ERun, repo: Path, needed_calls: int) -> None:
    """The CLI waited out the 429s itself: the run completed at iteration 2, no
    iteration failed, and more model calls were made than the script needs."""
    ends = assert_completed_at_two(run, repo)
    assert all(e["outcome"] != "agent_error" for e in ends)
    assert model_calls(run) > needed_calls, "the server never refused a call"
