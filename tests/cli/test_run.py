"""``autopilot run`` end to end with the scripted fake agent (fast loop tests)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import FakeAgent, read_jsonl, run_cli

S1 = "6f1c1d2e-1111-4aaa-8bbb-000000000001"
S2 = "6f1c1d2e-2222-4aaa-8bbb-000000000002"
"""Session ids in Claude Code's shape (a UUID)."""

METACHAR_PROMPT = (
    "Skill('devkit:git:code-review') 1) check 2) fix 3) done (2 Untested, 5 Failed)\n"
    'Fix the $(hostname) placeholder in Bob\'s code; `id`; fix #3639 -- *.ts - [ ] [x] "q"\n'
)


def _run_dir(tmp_path: Path) -> Path:
    runs = [p for p in (tmp_path / "runs").iterdir() if p.is_dir() and not p.name.startswith(".")]
    assert len(runs) == 1
    return runs[0]


def _events(tmp_path: Path) -> list[dict[str, object]]:
    return read_jsonl(_run_dir(tmp_path) / "events.jsonl")


def _state(tmp_path: Path) -> dict[str, object]:
    loaded: dict[str, object] = json.loads((_run_dir(tmp_path) / "state.json").read_text())
    return loaded


def _terminal(events: list[dict[str, object]]) -> list[tuple[object, object]]:
    return [(e["type"], e["reason"]) for e in events if e["type"] in ("complete", "abort")]


def test_completes_when_the_agent_says_the_token(
    tmp_path: Path, repo: Path, fake_agent: FakeAgent
) -> None:
    env = fake_agent(
        [
            [
                {"write_file": "a.txt", "content": "a"},
                {
                    "result": "wrote a.txt",
                    "cost_usd": 0.01,
                    "input_tokens": 100,
                    "output_tokens": 10,
                },
            ],
            [
                {"echo_prompt": True},
                {
                    "result": "all done. COMPLETE",
                    "cost_usd": 0.02,
                    "input_tokens": 200,
                    "output_tokens": 20,
                },
            ],
        ]
    )
    done = run_cli(["run", "-p", METACHAR_PROMPT, "--max-iterations", "5"], cwd=repo, env=env)
    assert done.returncode == 0, done.stderr
    events = _events(tmp_path)
    assert _terminal(events) == [("complete", "completion_promise")]
    ends = [e for e in events if e["type"] == "iteration_end"]
    assert [e["iteration"] for e in ends] == [1, 2]
    assert ends[-1]["tokens"] == {"input": 300, "output": 30}
    assert ends[-1]["costUsd"] == 0.03
    state = _state(tmp_path)
    assert state["spend"] == {
        "costUsd": 0.03,
        "tokens": {"input": 300, "output": 30},
        "activeMs": state["spend"]["activeMs"],
        "waitingMs": 0,
        "iterations": 2,  # type: ignore[index]
    }
    # The prompt reached the agent whole, through no shell (issue anthropics/claude-plugins-official#748).
    folder = _run_dir(tmp_path)
    sent = (folder / "iter-0002" / "prompt.md").read_text()
    assert sent.startswith(METACHAR_PROMPT)  # then the memory file's paragraph
    stdout = (folder / "iter-0002" / "stdout.log").read_text()
    assert json.dumps(METACHAR_PROMPT, ensure_ascii=False)[1:-1] in stdout
    assert events[0]["type"] == "armed"
    index = read_jsonl(tmp_path / "runs" / "index.jsonl")
    assert [row["runId"] for row in index] == [folder.name]
    assert isinstance(index[0]["ts"], int)


def test_flag_equals_form_and_base_ten(tmp_path: Path, repo: Path, fake_agent: FakeAgent) -> None:
    # Issue anthropics/claude-code#18646: --flag=value works, 08 is eight, limits are echoed.
    env = fake_agent([[{"result": "EVERYTHING_MIGRATED"}]])
    done = run_cli(
        ["run", "-p", "migrate", "--max-iterations=08", "--completion-promise=EVERYTHING_MIGRATED"],
        cwd=repo,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    assert "iterations 1..8" in done.stdout
    assert "completion promise EVERYTHING_MIGRATED" in done.stdout
    config = _state(tmp_path)["config"]
    assert isinstance(config, dict)
    assert (config["max_iterations"], config["completion_promise"]) == (8, "EVERYTHING_MIGRATED")


def test_completion_on_the_last_allowed_iteration(
    tmp_path: Path, repo: Path, fake_agent: FakeAgent
) -> None:
    # Issue mikeyobrien/ralph-orchestrator#369: the promise on the last iteration completes.
    env = fake_agent([[{"result": "LOOP_COMPLETE"}]])
    done = run_cli(
        ["run", "-p", "x", "--max-iterations", "1", "--completion-promise", "LOOP_COMPLETE"],
        cwd=repo,
        env=env,
    )
    assert done.returncode == 0
    assert _terminal(_events(tmp_path)) == [("complete", "completion_promise")]


def test_iteration_budget_ends_the_run_with_exit_3(
    tmp_path: Path, repo: Path, fake_agent: FakeAgent
) -> None:
    env = fake_agent([[{"shell": "date +%N >> log.txt"}, {"result": "one more step done"}]])
    done = run_cli(["run", "-p", "x", "--max-iterations", "3"], cwd=repo, env=env)
    assert done.returncode == 3
    events = _events(tmp_path)
    assert _terminal(events) == [("abort", "max_iterations")]
    assert len([e for e in events if e["type"] == "iteration_start"]) == 3


def test_subagent_and_echoed_tokens_do_not_complete(
    tmp_path: Path, repo: Path, fake_agent: FakeAgent
) -> None:
    prompt = "Reminder: when every story passes, reply with <promise>COMPLETE</promise>\n"
    env = fake_agent(
        [
            [{"subagent_text": "COMPLETE"}, {"shell": "date +%N >> a"}, {"result": "still going"}],
            [{"shell": "date +%N >> b"}, {"result": prompt}],
        ]
    )
    done = run_cli(["run", "-p", prompt, "--max-iterations", "2"], cwd=repo, env=env)
    assert done.returncode == 3
    assert _terminal(_events(tmp_path)) == [("abort", "max_iterations")]


def test_stagnation_warns_then_halts(tmp_path: Path, repo: Path, fake_agent: FakeAgent) -> None:
    env = fake_agent([[{"result": "I looked around."}]])
    done = run_cli(["run", "-p", "x", "--max-iterations", "10"], cwd=repo, env=env)
    assert done.returncode == 1
    events = _events(tmp_path)
    assert [e["streak"] for e in events if e["type"] == "stagnation"] == [1, 2, 3]
    assert any(e["type"] == "warning" and "one more halts" in str(e["note"]) for e in events)
    assert _terminal(events) == [("abort", "stagnation")]


def test_three_identical_responses_halt_at_the_third(
    tmp_path: Path, repo: Path, fake_agent: FakeAgent
) -> None:
    # N identical responses in a row halt at the Nth, N = 3; the agent reads, changes nothing.
    env = fake_agent([[{"tool": "Read", "input": {"file_path": "README.md"}}, {"result": "Same."}]])
    done = run_cli(["run", "-p", "x", "--max-iterations", "10"], cwd=repo, env=env)
    assert done.returncode == 1
    events = _events(tmp_path)
    assert len([e for e in events if e["type"] == "iteration_start"]) == 3
    assert [(e["iteration"], e["streak"]) for e in events if e["type"] == "stagnation"] == [
        (2, 2),
        (3, 3),
    ]
    aborts = [e for e in events if e["type"] == "abort"]
    assert aborts[0]["reason"] == "stagnation"
    assert str(aborts[0]["note"]).startswith("3 iterations in a row without progress")


def test_stagnation_limit_0_logs_no_stagnation(
    tmp_path: Path, repo: Path, fake_agent: FakeAgent
) -> None:
    env = fake_agent([[{"result": "I looked around."}]])
    args = ["run", "-p", "x", "--max-iterations", "4", "--stagnation-limit", "0"]
    done = run_cli(args, cwd=repo, env=env)
    assert done.returncode == 3
    events = _events(tmp_path)
    assert len([e for e in events if e["type"] == "iteration_start"]) == 4
    assert not [e for e in events if e["type"] == "stagnation"]
    assert not [e for e in events if "without progress" in str(e.get("note"))]


def test_a_status_line_does_not_complete_unless_word_matching_is_asked(
    tmp_path: Path, repo: Path, fake_agent: FakeAgent
) -> None:
    message = "Phase 1: COMPLETE\nPhase 2: IN PROGRESS"
    env = fake_agent([[{"shell": "date +%N >> log.txt"}, {"result": message}]])
    done = run_cli(["run", "-p", "x", "--max-iterations", "2"], cwd=repo, env=env)
    assert done.returncode == 3
    assert "completion promise COMPLETE (sentence)" in done.stdout
    assert _terminal(_events(tmp_path)) == [("abort", "max_iterations")]
    again = run_cli(
        ["run", "-p", "x", "--max-iterations", "2", "--completion-match", "word"],
        cwd=repo,
        env=env,
    )
    assert again.returncode == 0, again.stderr


def test_command_agent_final_message_does_not_start_inside_a_fence(
    tmp_path: Path, repo: Path
) -> None:
    program = tmp_path / "agent.sh"
    program.write_text("#!/bin/sh\nprintf 'Example:\\n```\\nstep 1\\n\\nCOMPLETE\\n```\\n'\n")
    program.chmod(0o755)
    done = run_cli(
        ["run", "--agent", "command", "-p", "x", "--max-iterations", "1", "--", str(program)],
        cwd=repo,
    )
    assert done.returncode == 3, done.stdout + done.stderr
    ends = [e for e in _events(tmp_path) if e["type"] == "iteration_end"]
    assert ends[0]["outcome"] == "ok"


def test_commits_are_progress_and_observed(
    tmp_path: Path, repo: Path, fake_agent: FakeAgent
) -> None:
    # Issue frankbria/ralph-claude-code#141: each iteration commits; the tree is clean afterwards.
    commit = "date +%N > f.txt && git add -A && git commit -qm 'step' -m 'Co-authored-by: bot'"
    env = fake_agent([[{"shell": commit}, {"result": "task done."}]])
    done = run_cli(["run", "-p", "x", "--max-iterations", "4"], cwd=repo, env=env)
    assert done.returncode == 3
    events = _events(tmp_path)
    assert not [e for e in events if e["type"] == "stagnation"]
    commits = [e for e in events if e["type"] == "commit_observed"]
    assert len(commits) == 4
    assert all(len(str(c["sha"])) == 40 and c["subject"] == "step" for c in commits)
    assert commits[0]["trailers"] == ["Co-authored-by: bot"]


def test_nesting_marker_removed_from_agent_env(
    tmp_path: Path, repo: Path, fake_agent: FakeAgent
) -> None:
    # Issue umputun/ralphex#156: the driver itself runs inside a Claude Code session.
    env = fake_agent([[{"shell": "env > ../agent-env.txt"}, {"result": "COMPLETE"}]])
    done = run_cli(["run", "-p", "x"], cwd=repo, env={**env, "CLAUDECODE": "1"})
    assert done.returncode == 0
    agent_env = (repo.parent / "agent-env.txt").read_text().splitlines()
    assert not [line for line in agent_env if line.startswith("CLAUDECODE=")]
    assert "AUTOPILOT_ITERATION=1" in agent_env


def test_missing_agent_is_one_line_naming_the_install(tmp_path: Path, repo: Path) -> None:
    done = run_cli(["run", "-p", "x"], cwd=repo, env={"AUTOPILOT_CLAUDE_BIN": "no-such-claude"})
    assert done.returncode == 4
    assert done.stderr.count("\n") == 1
    assert "npm install -g @anthropic-ai/claude-code" in done.stderr
    assert not (tmp_path / "runs").exists() or not list((tmp_path / "runs").glob("*-*"))


def test_timeout_is_recorded_and_the_loop_goes_on(
    tmp_path: Path, repo: Path, fake_agent: FakeAgent
) -> None:
    env = fake_agent(
        [[{"write_file": "w.txt", "content": "x"}, {"sleep": 60}], [{"result": "COMPLETE"}]]
    )
    done = run_cli(
        ["run", "-p", "x", "--iteration-timeout", "2s", "--max-iterations", "3"], cwd=repo, env=env
    )
    assert done.returncode == 0
    ends = [e for e in _events(tmp_path) if e["type"] == "iteration_end"]
    assert [e["outcome"] for e in ends] == ["timeout", "ok"]
    assert ends[0]["progress"] == "made"  # git progress is measured even on timeout


def test_agent_deleting_project_files_loses_no_state(
    tmp_path: Path, repo: Path, fake_agent: FakeAgent
) -> None:
    # Issue frankbria/ralph-claude-code#149: state lives outside the work tree.
    (repo / ".autopilot").mkdir()
    (repo / ".autopilot" / "config.toml").write_text("max_iterations = 3\n")
    env = fake_agent(
        [
            [{"shell": "rm -rf .autopilot && git clean -fdxq"}, {"result": "cleaned"}],
            [{"result": "COMPLETE"}],
        ]
    )
    done = run_cli(["run", "-p", "clean up"], cwd=repo, env=env)
    assert done.returncode == 0
    assert _state(tmp_path)["spend"]["iterations"] == 2  # type: ignore[index]


def test_command_agent_prompt_on_stdin_arg_and_file(tmp_path: Path, repo: Path) -> None:
    program = tmp_path / "agent.py"
    program.write_text(
        "import sys\n"
        "text = sys.argv[-1] if len(sys.argv) > 1 else sys.stdin.read()\n"
        "if text.endswith('.md'):\n    text = open(text).read()\n"
        "print('working on: ' + text.strip())\nprint()\nprint('done. COMPLETE')\n"
    )
    import sys as _sys

    for via in ("stdin", "arg", "file"):
        done = run_cli(
            [
                "run",
                "--agent",
                "command",
                "-p",
                METACHAR_PROMPT,
                "--prompt-via",
                via,
                "--",
                _sys.executable,
                str(program),
            ],
            cwd=repo,
        )
        assert done.returncode == 0, (via, done.stderr)
    for folder in (tmp_path / "runs").glob("*-*"):
        stdout = (folder / "iter-0001" / "stdout.log").read_text()
        assert "working on: " + METACHAR_PROMPT.strip() in stdout


def test_continue_falls_back_to_a_fresh_session_when_resume_fails(
    tmp_path: Path, repo: Path, fake_agent: FakeAgent
) -> None:
    env = fake_agent(
        [
            [{"shell": "date +%N >> a"}, {"result": "first step"}],
            [
                {"result": f"No conversation found with session ID: {S1}", "is_error": True},
                {"exit": 1},
            ],
            [{"shell": "date +%N >> b"}, {"result": "COMPLETE"}],
        ],
        select="invocation",
    )
    script = json.loads(Path(env["FAKE_AGENT_SCRIPT"]).read_text())
    script["iterations"][0]["session_id"] = S1
    script["iterations"][2]["session_id"] = S2
    Path(env["FAKE_AGENT_SCRIPT"]).write_text(json.dumps(script))
    done = run_cli(["run", "-p", "x", "--continue", "--plain"], cwd=repo, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    events = _events(tmp_path)
    assert any(
        e["type"] == "warning" and f"resuming session {S1} failed" in str(e["note"]) for e in events
    )
    ends = [e for e in events if e["type"] == "iteration_end"]
    # The failed resume is recorded and charged, then iteration 2 runs again, fresh.
    assert [(e["iteration"], e["sessionId"], e["outcome"]) for e in ends] == [
        (1, S1, "ok"),
        (2, S1, "agent_error"),
        (2, S2, "ok"),
    ]
    assert [e["iterationsSpent"] for e in ends] == [1, 1, 2]
    state = _state(tmp_path)
    assert state["sessionId"] == S2
    assert state["spend"]["iterations"] == 2
    folder = _run_dir(tmp_path)
    # The failed attempt's files are kept; the fresh one has a folder of its own.
    assert "No conversation found" in (folder / "iter-0002" / "stdout.log").read_text()
    assert S2 in (folder / "iter-0002.2" / "stdout.log").read_text()


def test_a_closed_stdout_does_not_end_a_foreground_run(tmp_path: Path, repo: Path) -> None:
    # `autopilot run … | head -1`: the reader has gone before the run prints its
    # limits; the run goes on to its real end and exit code.
    program = tmp_path / "agent.sh"
    program.write_text("#!/bin/sh\necho working\necho\necho COMPLETE\n")
    program.chmod(0o755)
    argv = [sys.executable, "-m", "autopilot", "run", "--agent", "command", "-p", "hi"]
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = subprocess.run(
            [*argv, "--", str(program)],
            cwd=repo,
            stdin=subprocess.DEVNULL,
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
            check=False,
        )
    finally:
        os.close(write_end)
    assert (done.returncode, done.stderr) == (0, "")
    state = _state(tmp_path)
    assert (state["status"], state["terminationReason"]) == ("completed", "completion_promise")


def test_a_prompt_too_long_for_one_argument_is_refused_at_start(tmp_path: Path, repo: Path) -> None:
    (repo / "big.md").write_text("x" * 200_000)
    args = ["run", "-f", "big.md", "--agent", "command", "--prompt-via", "arg", "--", "true"]
    done = run_cli(args, cwd=repo)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "autopilot: error: the prompt is 200000 bytes, over the 131071 bytes the OS allows "
        "one argument (Linux's MAX_ARG_STRLEN): pass it with --prompt-via stdin or "
        "--prompt-via file"
    ]
    assert not (tmp_path / "runs").exists() or not list((tmp_path / "runs").glob("*-*"))
    ok = run_cli(
        [*args[:5], "--prompt-via", "stdin", "--max-iterations", "1", "--", "true"], cwd=repo
    )
    assert ok.returncode != 2, ok.stderr


def test_a_prompt_argument_that_is_not_utf8_is_refused_at_start(tmp_path: Path, repo: Path) -> None:
    done = run_cli(["run", "-p", os.fsdecode(b"fix \xff it"), "--agent", "demo"], cwd=repo)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "autopilot: error: the prompt has a byte that is not UTF-8 (0xFF) at character 5, "
        "which is not text (an argument that is not UTF-8)"
    ]
    assert not (tmp_path / "runs").exists() or not list((tmp_path / "runs").glob("*-*"))
