"""The real agent CLIs (pinned in ``tests/e2e/package.json``) driven by ``autopilot run``,
offline against the scripted model server: one body per scenario, one row per CLI
(``clis.CLIS``).

* fresh sessions complete by promise at iteration 2, each iteration a new session;
* ``--continue`` resumes the first iteration's session with the CLI's resume argv;
* a refused key halts the run at once with the agent's own words;
* a 429 window is waited out, by the CLI itself or by autopilot retrying the same
  iteration without spending the budget.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.e2e.clis import CLIS, Cli
from tests.e2e.conftest import (
    E2ERun,
    argv_recorder,
    assert_auth_halt,
    assert_completed_at_two,
    assert_nothing_left_behind,
    assert_only_model_api,
    assert_recovered_on_its_own,
    assert_spend_agrees,
    cli_path,
    iteration_ends,
    recorded_argvs,
    run_offline,
    sent_prompt,
    terminal,
)

EVERY_CLI = [pytest.param(CLIS[name], id=name) for name in sorted(CLIS)]
LIMITED = [
    pytest.param(CLIS[name], id=name)
    for name in sorted(CLIS)
    if CLIS[name].recovers_itself is not None
]
"""The CLIs the 429 scenario runs for (Claude Code's is not scripted)."""


def _run(
    cli: Cli,
    tmp_path: Path,
    repo: Path,
    script: str,
    args: tuple[str, ...] = (),
    *,
    fail_for_seconds: float | None = None,
) -> tuple[E2ERun, list[list[str]]]:
    """``autopilot run --agent NAME -f PROMPT.md … ARGS`` offline; the run and the
    argvs the CLI was started with."""
    setup = cli.setup(tmp_path)
    wrapper, argv_folder = argv_recorder(tmp_path, cli_path(cli.name))
    (repo / "PROMPT.md").write_text(cli.prompt)
    command = ["run", "--agent", cli.name, "-f", "PROMPT.md", "--max-iterations", "5"]
    run = run_offline(
        tmp_path,
        repo,
        script=script,
        autopilot_args=[*command, *cli.run_args, *args],
        set_env={f"AUTOPILOT_{cli.name.upper()}_BIN": str(wrapper), **setup.set_env},
        templates=setup.templates,
        fail_for_seconds=fail_for_seconds,
        unset_env=setup.unset_env,
    )
    return run, recorded_argvs(argv_folder)


@pytest.mark.parametrize("cli", EVERY_CLI)
def test_fresh_sessions_complete_at_iteration_two(cli: Cli, tmp_path: Path, e2e_repo: Path) -> None:
    run, argvs = _run(cli, tmp_path, e2e_repo, "check-then-write")
    ends = assert_completed_at_two(run, e2e_repo)
    assert sent_prompt(run).startswith(cli.prompt)  # then the memory file's paragraph
    assert (e2e_repo / "hello.txt").read_text() == "hello from the fake model\n"
    assert ends[0]["progress"] == "made" and ends[0]["filesChanged"] == 1
    assert "<promise>COMPLETE</promise>" in str(ends[1]["excerpt"])
    assert ends[0]["sessionId"] and ends[0]["sessionId"] != ends[1]["sessionId"]
    assert [e["toolCalls"] for e in ends] == [2, 1]
    assert_spend_agrees(run, per_call_usage=cli.name != "claude", cost=cli.cost)
    assert_only_model_api(run, cli.api_prefixes)
    assert argvs == [cli.argv(run, e2e_repo, n, None, ()) for n in (1, 2)]
    cli.check_fresh(run)
    assert_nothing_left_behind(e2e_repo)


@pytest.mark.parametrize("cli", EVERY_CLI)
def test_continue_resumes_the_first_session(cli: Cli, tmp_path: Path, e2e_repo: Path) -> None:
    extra = cli.continue_args
    args = ("--continue", "--", *extra) if extra else ("--continue",)
    run, argvs = _run(cli, tmp_path, e2e_repo, "continue", args)
    ends = assert_completed_at_two(run, e2e_repo)
    session = ends[0]["sessionId"]
    assert session and ends[1]["sessionId"] == session
    assert run.state["sessionId"] == session
    assert "not finished" in str(ends[0]["excerpt"])
    assert (e2e_repo / "hello.txt").read_text().splitlines() == [
        "hello from the fake model",
        "second-turn",
    ]
    assert argvs == [
        cli.argv(run, e2e_repo, 1, None, extra),
        cli.argv(run, e2e_repo, 2, session, extra),
    ]
    # The resumed turn carries the first iteration's answer in its history.
    assert "not finished yet" in json.dumps(run.requests[-1]["body"])
    if cli.name != "claude":
        # Each iteration counts its own calls, also where the CLI reports the
        # session's totals (Codex, Copilot's usage file).
        assert [e["iterationTokens"] for e in ends] == [{"input": 200, "output": 40}] * 2
    assert_spend_agrees(run, per_call_usage=cli.name != "claude", cost=cli.cost)
    cli.check_continue(run)
    assert_nothing_left_behind(e2e_repo)


@pytest.mark.parametrize("cli", EVERY_CLI)
def test_auth_failure_halts_with_the_agents_own_message(
    cli: Cli, tmp_path: Path, e2e_repo: Path
) -> None:
    run, _ = _run(cli, tmp_path, e2e_repo, "auth-401")
    for words in cli.auth_words:
        assert_auth_halt(run, words)
    assert iteration_ends(run)[0]["exitCode"] == cli.auth_exit_code
    cli.check_auth(run)
    assert_nothing_left_behind(e2e_repo)


@pytest.mark.parametrize("cli", LIMITED)
def test_rate_limit_is_waited_out(cli: Cli, tmp_path: Path, e2e_repo: Path) -> None:
    window = cli.window_seconds
    run, argvs = _run(cli, tmp_path, e2e_repo, "check-then-write", fail_for_seconds=window)
    if cli.recovers_itself:
        assert_recovered_on_its_own(run, e2e_repo, needed_calls=5)
        assert_spend_agrees(run, per_call_usage=False, cost=cli.cost)
    else:
        _assert_autopilot_waited(run, len(argvs))
    cli.check_limit(run)
    assert_nothing_left_behind(e2e_repo)


def _assert_autopilot_waited(run: E2ERun, launches: int) -> None:
    """The CLI failed on the 429s; autopilot waited until the reset they named and
    retried the same iteration, spending no iteration on the waits."""
    assert run.returncode == 0, run.stdout + run.stderr
    assert terminal(run) == [("complete", "completion_promise")]
    ends = iteration_ends(run)
    limited = [e for e in ends if e["outcome"] == "rate_limited"]
    assert limited and all(e["iteration"] == 1 for e in limited)
    assert "429 Too Many Requests" in str(limited[0]["error"])
    assert [(e["iteration"], e["outcome"]) for e in ends[len(limited) :]] == [
        (1, "ok"),
        (2, "ok"),
    ]
    events = run.events
    waits = [i for i, e in enumerate(events) if e["type"] == "rate_limited"]
    assert len(waits) == len(limited)
    for at in waits:
        until = events[at]["waitingUntil"]
        assert isinstance(until, int) and until > int(events[at]["ts"])
        retry = events[at + 1]
        assert retry["type"] == "iteration_start" and retry["iteration"] == 1
        assert int(retry["ts"]) >= until  # it waited
    state = run.state
    assert state["spend"]["iterations"] == 2  # the waits spent no iteration
    assert state["spend"]["waitingMs"] > 0
    assert state["iter"] == 2 and state["waitingUntil"] is None
    assert launches == len(limited) + 2
