"""A whole run and git, through ``autopilot run`` with the scripted agent and real git:
checkpoints of every iteration that never touch the user's git state, diff and restore
afterwards, HEAD moved by the agent, and ``--worktree`` runs merged back."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.conftest import REPO_ROOT, FakeAgent, read_jsonl, run_cli
from tests.workspace.gitstate import files_of, git, user_git_state

# The agent snapshots the user's git state at the start and the end of each of its
# iterations; between one iteration's end and the next one's start only autopilot acts.
SNAPSHOT = (
    f"{sys.executable} -c \"import json, sys; sys.path.insert(0, '{REPO_ROOT}'); "
    "from pathlib import Path; from tests.workspace.gitstate import user_git_state; "
    "Path(sys.argv[1]).write_text(json.dumps(user_git_state(Path('.'))))\" "
)
QUIET_GIT = "git -c core.hooksPath=/dev/null"


def busy_iteration(number: int, snapshots: Path) -> list[dict[str, Any]]:
    """Edit, add, delete, and on even iterations commit (with a trailer)."""
    shell = [
        f"{SNAPSHOT} {snapshots}/start-{number}.json",
        "mkdir -p src",
        f"echo 'print({number})' > src/file{number}.py",
        f"echo 'iteration {number}' >> notes.txt",
        f"echo ignored > debug{number}.log",
    ]
    if number % 3 == 0:
        shell.append(f"rm -f src/file{number - 1}.py")
    if number % 2 == 0:
        shell += [
            f"{QUIET_GIT} add -A",
            f"{QUIET_GIT} commit -q -m 'iteration {number}' -m 'Co-authored-by: agent <a@b>'",
        ]
    shell.append(f"{SNAPSHOT} {snapshots}/end-{number}.json")
    return [
        {"shell": " && ".join(shell)},
        {"tool": "Bash", "input": {}, "output": "ok"},
        {"result": f"iteration {number} done"},
    ]


def run_dir_of(tmp_path: Path, label: str = "repo") -> Path:
    found = [p for p in (tmp_path / "runs").iterdir() if p.name.startswith(f"{label}-")]
    assert len(found) == 1, found
    return found[0]


def test_ten_busy_iterations_checkpointed_without_touching_the_users_git(
    tmp_path: Path, repo: Path, fake_agent: FakeAgent
) -> None:
    (repo / ".gitignore").write_text("*.log\n")
    git(repo, "add", ".gitignore")
    git(repo, "commit", "-q", "-m", "ignore logs")
    (repo / "README.md").write_text("edited, not committed\n")
    git(repo, "stash", "push", "-q", "-m", "the user's stash")
    (repo / "wip.txt").write_text("the user's work in progress\n")
    snapshots = tmp_path / "snapshots"
    snapshots.mkdir()
    before_run = user_git_state(repo)
    env = fake_agent([busy_iteration(n, snapshots) for n in range(1, 11)])

    done = run_cli(
        ["run", "-p", "work", "--max-iterations", "10", "--stagnation-limit", "0"],
        cwd=repo,
        env=env,
    )

    assert done.returncode == 3, done.stderr  # the iteration budget
    state = lambda name: json.loads((snapshots / name).read_text())  # noqa: E731
    assert state("start-1.json") == before_run
    for number in range(1, 10):
        assert state(f"end-{number}.json") == state(f"start-{number + 1}.json"), number
    assert user_git_state(repo) == state("end-10.json")
    folder = run_dir_of(tmp_path)
    events = read_jsonl(folder / "events.jsonl")
    checkpoints = [e for e in events if e["type"] == "checkpoint"]
    assert [c["name"] for c in checkpoints] == ["baseline"] + [
        f"iter-{n:04d}" for n in range(1, 11)
    ]
    for event in checkpoints:
        ref = f"refs/autopilot/{folder.name}/{event['name']}"
        assert git(repo, "rev-parse", ref).strip() == event["sha"]
    assert checkpoints[0]["files"] == ["A wip.txt"]
    assert checkpoints[3]["files"] == ["D src/file2.py", "A src/file3.py", "M notes.txt"] or set(
        checkpoints[3]["files"]
    ) == {"D src/file2.py", "A src/file3.py", "M notes.txt"}
    commits = [e for e in events if e["type"] == "commit_observed"]
    assert [c["subject"] for c in commits] == [f"iteration {n}" for n in (2, 4, 6, 8, 10)]
    assert all(c["trailers"] == ["Co-authored-by: agent <a@b>"] for c in commits)
    assert git(repo, "stash", "list").count("the user's stash") == 1

    # Each iteration's diff holds what it changed.
    for number in range(1, 11):
        shown = run_cli(["diff", folder.name, "--iteration", str(number)], cwd=tmp_path)
        assert shown.returncode == 0, shown.stderr
        assert f"+print({number})" in shown.stdout
        assert f"+iteration {number}\n" in shown.stdout
        assert "debug" not in shown.stdout

    # Restore iteration 2, then undo the restore.
    latest = files_of(repo)
    head = git(repo, "rev-parse", "HEAD")
    restored = run_cli(["restore", folder.name, "--iteration", "2"], cwd=tmp_path)
    assert restored.returncode == 0, restored.stderr
    assert (repo / "notes.txt").read_text() == "iteration 1\niteration 2\n"
    assert not (repo / "src/file3.py").exists()
    assert (repo / "debug7.log").exists()  # ignored files are left alone
    assert git(repo, "rev-parse", "HEAD") == head
    undo = run_cli(["restore", folder.name, "--checkpoint", "before-restore-0001"], cwd=tmp_path)
    assert undo.returncode == 0, undo.stderr
    assert files_of(repo) == latest


def test_the_agent_resets_and_switches_branches_mid_run(
    tmp_path: Path, repo: Path, fake_agent: FakeAgent
) -> None:
    first = git(repo, "rev-parse", "HEAD").strip()
    branch = git(repo, "symbolic-ref", "--short", "HEAD").strip()
    env = fake_agent(
        [
            [
                {"shell": f"echo a > a.txt && {QUIET_GIT} add -A && {QUIET_GIT} commit -q -m one"},
                {"result": "committed"},
            ],
            [{"shell": f"{QUIET_GIT} reset -q --hard HEAD~1"}, {"result": "reset"}],
            [
                {
                    "shell": f"{QUIET_GIT} checkout -q -b other && echo b > b.txt && {QUIET_GIT} add -A"
                    f" && {QUIET_GIT} commit -q -m two"
                },
                {"result": "on another branch"},
            ],
            [{"result": "COMPLETE"}],
        ]
    )

    done = run_cli(["run", "-p", "work", "--max-iterations", "6"], cwd=repo, env=env)

    assert done.returncode == 0, done.stderr
    events = read_jsonl(run_dir_of(tmp_path) / "events.jsonl")
    moves = [e for e in events if e["type"] == "head_moved"]
    assert [(m["iteration"], m["kind"], m["toBranch"]) for m in moves] == [
        (2, "rewound", branch),
        (3, "switched", "other"),
    ]
    assert moves[0]["to"] == first and moves[0]["dropped"] == 1
    assert [e["subject"] for e in events if e["type"] == "commit_observed"] == ["one", "two"]
    # The last iteration changed nothing: it shares the checkpoint before it.
    assert [(e["iteration"], e["name"]) for e in events if e["type"] == "checkpoint"] == [
        (0, "baseline"),
        (1, "iter-0001"),
        (2, "iter-0002"),
        (3, "iter-0003"),
        (4, "iter-0003"),
    ]
    assert git(repo, "symbolic-ref", "--short", "HEAD").strip() == "other"


def test_no_checkpoints_and_outside_a_repository(
    tmp_path: Path, repo: Path, fake_agent: FakeAgent
) -> None:
    env = fake_agent([[{"write_file": "a.txt", "content": "a"}, {"result": "COMPLETE"}]])
    done = run_cli(["run", "-p", "work", "--no-checkpoints"], cwd=repo, env=env)
    assert done.returncode == 0, done.stderr
    assert git(repo, "for-each-ref", "refs/autopilot") == ""
    plain = tmp_path / "plain"
    plain.mkdir()
    done = run_cli(["run", "-p", "work", "--label", "plain"], cwd=plain, env=env)
    assert done.returncode == 0, done.stderr
    events = read_jsonl(run_dir_of(tmp_path, "plain") / "events.jsonl")
    warnings = [e["note"] for e in events if e["type"] == "warning"]
    assert sum("not a git repository" in w or "not in a git repository" in w for w in warnings) == 1
    assert not any(e["type"] == "checkpoint" for e in events)


def _start(repo: Path, env: dict[str, str], label: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "autopilot",
            "run",
            "-p",
            "work",
            "--worktree",
            "--label",
            label,
            "--max-iterations",
            "3",
            "--plain",
        ],
        cwd=repo,
        env=dict(os.environ, **env),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_two_worktree_runs_at_once_both_merge_back(
    tmp_path: Path, repo: Path, fake_agent: FakeAgent
) -> None:
    (repo / "scratch.md").write_text("an unrelated untracked file\n")
    before = files_of(repo), user_git_state(repo)
    runs = []
    for label in ("left", "right"):
        env = fake_agent(
            [
                [
                    {
                        "shell": f"echo {label} > {label}.txt && {QUIET_GIT} add -A && "
                        f"{QUIET_GIT} commit -q -m {label}"
                    },
                    {"sleep": 1.5},
                    {"result": "COMPLETE"},
                ],
            ]
        )
        runs.append(_start(repo, env, label))
    outputs = [proc.communicate(timeout=120) for proc in runs]
    assert [proc.returncode for proc in runs] == [0, 0], outputs
    assert files_of(repo) == before[0]  # the checkout was never written
    assert git(
        repo, "for-each-ref", "--format=%(refname:short)", "refs/heads/autopilot"
    ).split() == [
        f"autopilot/{run_dir_of(tmp_path, 'left').name}",
        f"autopilot/{run_dir_of(tmp_path, 'right').name}",
    ]
    listed = run_cli(["list"], cwd=repo).stdout
    assert "autopilot/left-" in listed and "autopilot/right-" in listed
    status = run_cli(["status", run_dir_of(tmp_path, "left").name], cwd=repo).stdout
    assert (
        f"worktree   {tmp_path / 'runs' / 'worktrees' / run_dir_of(tmp_path, 'left').name}"
        in status
    )
    here = run_cli(["status"], cwd=repo)  # a worktree run started here is this project's
    assert here.returncode == 0 and "branch     autopilot/" in here.stdout, here.stderr
    for label in ("left", "right"):
        merged = run_cli(["merge", run_dir_of(tmp_path, label).name], cwd=repo)
        assert merged.returncode == 0, merged.stderr
    assert (repo / "left.txt").read_text() == "left\n"
    assert (repo / "right.txt").read_text() == "right\n"
    assert (repo / "scratch.md").exists()
    assert git(repo, "status", "--porcelain") == "?? scratch.md\n"


def _iteration_started(runs: Path, label: str) -> bool:
    logs = list(runs.glob(f"{label}-*/events.jsonl")) if runs.is_dir() else []
    return any(b'"iteration_start"' in log.read_bytes() for log in logs)


def test_a_worktree_deleted_under_a_running_run_ends_it(
    tmp_path: Path, repo: Path, fake_agent: FakeAgent
) -> None:
    env = fake_agent([[{"sleep": 2}, {"result": "working"}]])
    proc = _start(repo, env, "doomed")
    deadline = time.monotonic() + 60
    worktrees = tmp_path / "runs" / "worktrees"
    # The folder appears before git has registered the worktree: wait for the agent.
    while time.monotonic() < deadline and not _iteration_started(tmp_path / "runs", "doomed"):
        time.sleep(0.1)
    place = next(worktrees.iterdir())
    git(repo, "worktree", "remove", "--force", str(place))
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 1, (out, err)
    assert "Traceback" not in err
    events = read_jsonl(run_dir_of(tmp_path, "doomed") / "events.jsonl")
    assert events[-1]["type"] == "abort"
    assert events[-1]["reason"] == "workspace_gone"
    assert str(place) in events[-1]["note"]


def test_worktree_runs_refuse_what_cannot_hold_a_worktree_in_one_line(
    tmp_path: Path, fake_agent: FakeAgent
) -> None:
    env = fake_agent([[{"result": "COMPLETE"}]])
    plain = tmp_path / "plain"
    plain.mkdir()
    empty = tmp_path / "empty"
    empty.mkdir()
    git(empty, "init", "-q")
    for where, words in ((plain, "is not in a git repository"), (empty, "has no commits yet")):
        done = run_cli(["run", "-p", "work", "--worktree"], cwd=where, env=env)
        assert done.returncode == 2, done.stderr
        assert done.stderr.count("\n") == 1 and words in done.stderr
    assert not (tmp_path / "runs").exists() or not [
        p for p in (tmp_path / "runs").iterdir() if not p.name.startswith(".")
    ]


def _events_of(runs: Path, label: str) -> list[dict[str, Any]]:
    logs = list(runs.glob(f"{label}-*/events.jsonl")) if runs.is_dir() else []
    return read_jsonl(logs[0]) if logs else []


def test_the_off_file_in_the_users_checkout_holds_a_worktree_run(
    tmp_path: Path, repo: Path, fake_agent: FakeAgent
) -> None:
    env = fake_agent([[{"sleep": 1.5}, {"result": "working"}], [{"result": "COMPLETE"}]])
    proc = _start(repo, env, "held")
    runs, deadline = tmp_path / "runs", time.monotonic() + 60
    while time.monotonic() < deadline and not _iteration_started(runs, "held"):
        time.sleep(0.1)
    (repo / ".autopilot").mkdir()
    (repo / ".autopilot" / "OFF").write_text("")  # where the user runs `autopilot off`
    while time.monotonic() < deadline and not any(
        e["type"] == "pause" for e in _events_of(runs, "held")
    ):
        time.sleep(0.1)
    held = [e["type"] for e in _events_of(runs, "held")]
    assert held.count("iteration_start") == 1 and held[-1] == "pause", held
    status = run_cli(["status", run_dir_of(tmp_path, "held").name], cwd=repo).stdout
    assert "status     paused" in status
    (repo / ".autopilot" / "OFF").unlink()
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, (out, err)
    types = [e["type"] for e in _events_of(runs, "held")]
    assert types.count("iteration_start") == 2 and "resume" in types
    assert types[-1] == "complete"
