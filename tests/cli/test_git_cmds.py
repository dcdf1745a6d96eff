"""``checkpoints``, ``diff``, ``restore`` and ``merge`` from the command line."""

from __future__ import annotations

import json
import os
from pathlib import Path

import psutil

from autopilot.view.plain import format_moment
from autopilot.workspace.repo import open_repository
from autopilot.workspace.run_workspace import checkpoints_of
from autopilot.workspace.taking import RunCheckpointer
from autopilot.workspace.worktrees import create_worktree
from tests.cli.test_tty import _run_in_pty
from tests.conftest import read_jsonl, run_cli
from tests.manage.runs import alive_driver, dead_driver, make_run, now_ms
from tests.workspace.gitstate import files_of, git, make_repo, user_git_state


def recorded_run(tmp_path: Path, repo: Path, iterations: int = 3, **state: object) -> str:
    """A run folder whose state names ``repo``, with a baseline and ``iterations``
    checkpoints (iteration N writes ``step.txt`` = N and adds ``fileN.txt``)."""
    root = tmp_path / "runs"
    run_id = make_run(
        root,
        "work",
        now_ms(),
        terminal=("complete", "completion_promise"),
        state={"cwd": str(repo), **state},
    )
    store = checkpoints_of(root / run_id, open_repository(repo))
    store.take_baseline()
    for number in range(1, iterations + 1):
        (repo / "step.txt").write_text(f"{number}\n")
        (repo / f"file{number}.txt").write_text(f"file {number}\n")
        store.take_iteration(number)
    return run_id


def test_checkpoints_lists_them(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    run_id = recorded_run(tmp_path, repo, iterations=2)
    done = run_cli(["checkpoints", run_id], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].split() == ["checkpoint", "iteration", "files", "commit", "taken"]
    assert [line.split()[:3] for line in lines[1:]] == [
        ["baseline", "0", "0"],
        ["iter-0001", "1", "2"],
        ["iter-0002", "2", "2"],
    ]
    as_json = run_cli(["checkpoints", "--json"], cwd=repo)  # RUN omitted: this project's
    rows = [json.loads(line) for line in as_json.stdout.splitlines()]
    assert [(r["name"], r["kind"], r["filesChanged"]) for r in rows] == [
        ("baseline", "baseline", 0),
        ("iter-0001", "iteration", 2),
        ("iter-0002", "iteration", 2),
    ]


def test_diff_of_one_iteration_and_of_the_whole_run(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    run_id = recorded_run(tmp_path, repo)
    second = run_cli(["diff", run_id, "--iteration", "2"], cwd=tmp_path)
    assert second.returncode == 0, second.stderr
    assert "-1\n+2\n" in second.stdout and "+file 2" in second.stdout
    assert "file 1" not in second.stdout and "file 3" not in second.stdout
    whole = run_cli(["diff", run_id], cwd=tmp_path).stdout
    assert all(f"+file {n}" in whole for n in (1, 2, 3)) and "+3\n" in whole
    stat = run_cli(["diff", run_id, "--stat"], cwd=tmp_path).stdout
    assert "4 files changed" in stat


def test_restore_and_undo_from_the_command_line(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    run_id = recorded_run(tmp_path, repo)
    latest, before_git = files_of(repo), user_git_state(repo)

    done = run_cli(["restore", run_id, "--iteration", "1"], cwd=tmp_path)

    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        f"restored iter-0001 of run {run_id} in {repo}: 3 files (deleted file2.txt, "
        "deleted file3.txt, modified step.txt)",
        "your branch, HEAD and index were not changed; to undo: "
        f"autopilot restore {run_id} --checkpoint before-restore-0001",
    ]
    assert (repo / "step.txt").read_text() == "1\n"
    assert user_git_state(repo) == before_git
    restored = read_jsonl(tmp_path / "runs" / run_id / "events.jsonl")
    assert restored[-1]["type"] == "restored"
    safety = checkpoints_of(tmp_path / "runs" / run_id, open_repository(repo)).find(
        "before-restore-0001"
    )
    assert {k: v for k, v in restored[-1].items() if k not in ("ts", "runId", "type")} == {
        "checkpoint": "iter-0001",
        "sha": checkpoints_of(tmp_path / "runs" / run_id, open_repository(repo))
        .find_iteration(1)
        .sha,
        "iteration": 1,
        "safetyCheckpoint": "before-restore-0001",
        "safetySha": safety.sha,
        "filesChanged": 3,
        "files": ["D file2.txt", "D file3.txt", "M step.txt"],
    }
    status = run_cli(["status", run_id], cwd=tmp_path).stdout
    assert (
        f"restored   iter-0001 at {format_moment(restored[-1]['ts'], day_of_ms=now_ms())} (3 files); undo: "
        f"autopilot restore {run_id} --checkpoint before-restore-0001"
    ) in status
    replay = run_cli(["replay", run_id], cwd=tmp_path).stdout
    assert f" restored checkpoint=iter-0001 sha={restored[-1]['sha']}" in replay
    undo = run_cli(["restore", run_id, "--checkpoint", "before-restore-0001"], cwd=tmp_path)
    assert undo.returncode == 0, undo.stderr
    assert files_of(repo) == latest
    listed = run_cli(["checkpoints", run_id], cwd=tmp_path).stdout
    assert "restore-0002" in listed and "before-restore-0002" in listed
    again = read_jsonl(tmp_path / "runs" / run_id / "events.jsonl")[-1]
    assert (again["type"], again["checkpoint"], again.get("iteration")) == (
        "restored",
        "before-restore-0001",
        None,
    )
    assert "restored   before-restore-0001 at" in run_cli(["status", run_id], cwd=tmp_path).stdout


def test_restore_and_diff_leave_a_backlog_runs_records_alone(tmp_path: Path) -> None:
    # Each iteration's checkpoint is taken with its item still running; the item is
    # concluded after it. A restore must not bring the claim back, nor diff show it.
    repo = make_repo(tmp_path / "repo")
    (repo / ".autopilot").mkdir()
    tasks = repo / ".autopilot" / "tasks.jsonl"
    root = tmp_path / "runs"
    run_id = make_run(
        root, "work", now_ms(), terminal=("complete", "backlog_done"), state={"cwd": str(repo)}
    )
    store = checkpoints_of(root / run_id, open_repository(repo))
    tasks.write_text('{"id": "a", "status": "ready"}\n')
    store.take_baseline()
    for number in (1, 2):
        tasks.write_text(f'{{"id": "a", "status": "running", "attempt": {number}}}\n')
        (repo / "step.txt").write_text(f"{number}\n")
        store.take_iteration(number)
    tasks.write_text('{"id": "a", "status": "completed", "attempt": 2}\n')
    (repo / ".autopilot" / "memory.md").write_text("notes\n")

    patch = run_cli(["diff", run_id, "--iteration", "2"], cwd=tmp_path).stdout
    assert "step.txt" in patch and "tasks.jsonl" not in patch
    done = run_cli(["restore", run_id, "--iteration", "1"], cwd=tmp_path)

    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[:3] == [
        f"restored iter-0001 of run {run_id} in {repo}: 1 file (modified step.txt)",
        "kept .autopilot/memory.md as it is (a restore does not rewind it)",
        "kept .autopilot/tasks.jsonl as it is (a restore does not rewind it)",
    ]
    assert tasks.read_text() == '{"id": "a", "status": "completed", "attempt": 2}\n'
    assert (repo / ".autopilot" / "memory.md").read_text() == "notes\n"
    assert (repo / "step.txt").read_text() == "1\n"


def test_restore_refuses_while_the_driver_is_alive(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    run_id = recorded_run(tmp_path, repo)
    state_path = tmp_path / "runs" / run_id / "state.json"
    state = json.loads(state_path.read_text())
    state.update(terminated=False, status="running", **alive_driver())
    state_path.write_text(json.dumps(state))
    before = files_of(repo)
    done = run_cli(["restore", run_id, "--iteration", "1"], cwd=tmp_path)
    assert done.returncode == 4
    assert (
        done.stderr
        == f"autopilot: error: run {run_id} is running; stop it first (autopilot stop)\n"
    )
    assert files_of(repo) == before


def test_restore_refuses_while_the_supervisor_is_about_to_relaunch_the_driver(
    tmp_path: Path,
) -> None:
    repo = make_repo(tmp_path / "repo")
    run_id = recorded_run(tmp_path, repo)
    state_path = tmp_path / "runs" / run_id / "state.json"
    state = json.loads(state_path.read_text())
    state.update(terminated=False, status="running", **dead_driver())
    # The supervisor (this very process) is alive: its daemon died, and it relaunches it.
    state.update(supervisorPid=os.getpid(), supervisorStartTime=psutil.Process().create_time())
    state_path.write_text(json.dumps(state))
    before, log = files_of(repo), (tmp_path / "runs" / run_id / "events.jsonl").read_bytes()
    done = run_cli(["restore", run_id, "--iteration", "1"], cwd=tmp_path)
    assert done.returncode == 4
    assert done.stderr == (
        f"autopilot: error: run {run_id} is being relaunched by its supervisor "
        f"(pid {os.getpid()}); stop it first (autopilot stop)\n"
    )
    assert files_of(repo) == before
    assert (tmp_path / "runs" / run_id / "events.jsonl").read_bytes() == log
    state.update(supervisorPid=None, supervisorStartTime=None)
    state_path.write_text(json.dumps(state))  # the supervisor gave up: nothing is active
    assert run_cli(["restore", run_id, "--iteration", "1"], cwd=tmp_path).returncode == 0


def test_bad_input_is_one_line(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    run_id = recorded_run(tmp_path, repo)
    plain = make_run(tmp_path / "runs", "plain", now_ms() + 1, state={"cwd": str(tmp_path)})
    empty = make_run(tmp_path / "runs", "empty", now_ms() + 2, state={"cwd": str(repo)})
    cases = [
        (["restore", run_id], 2, "give one of --iteration N or --checkpoint NAME"),
        (["restore", run_id, "--iteration", "1", "--checkpoint", "baseline"], 2, "give one of"),
        (["restore", run_id, "--iteration", "x"], 2, "--iteration must be a whole number"),
        (["restore", run_id, "--iteration", "9"], 2, "has no checkpoint of iteration 9"),
        (["restore", run_id, "--checkpoint", "../x"], 2, "has no checkpoint '../x'"),
        (["diff", run_id, "--iteration", "0"], 2, "--iteration must be at least 1"),
        (["diff", empty], 2, f"run {empty} has no checkpoints"),
        (["checkpoints", plain], 2, f"worked in {tmp_path}: {tmp_path} is not in a git repository"),
        (["merge", run_id], 2, f"run {run_id} did not run in a worktree"),
        (["merge", run_id, "--squash", "--rebase"], 2, "did not run in a worktree"),
    ]
    for args, code, words in cases:
        done = run_cli(args, cwd=tmp_path)
        assert done.returncode == code, (args, done.stderr)
        assert len(done.stderr.splitlines()) == 1 and words in done.stderr, (args, done.stderr)


def test_merge_a_worktree_run(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    root = tmp_path / "runs"
    made, _ = create_worktree(open_repository(repo), tmp_path / "wt", "wt-1796000000000")
    (made.path / "feature.txt").write_text("feature\n")
    git(made.path, "add", "-A")
    git(made.path, "commit", "-q", "-m", "feature")
    run_id = make_run(
        root,
        "wt",
        1_796_000_000_000,
        terminal=("complete", "completion_promise"),
        state={"cwd": str(made.path), "worktree": made.to_json()},
    )
    done = run_cli(["merge", run_id, "--squash"], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"merged autopilot/{run_id} into main (squash): 1 file changed")
    assert (repo / "feature.txt").read_text() == "feature\n"
    assert git(repo, "log", "-1", "--format=%s").strip() == f"autopilot: merge run {run_id}"
    again = run_cli(["merge", run_id], cwd=repo)
    assert again.returncode == 0, again.stderr
    assert again.stdout == f"nothing to merge: main already has everything on autopilot/{run_id}\n"


def test_merge_leaves_a_committed_memory_file_on_the_branch(tmp_path: Path) -> None:
    # A run made before the worktree's .gitignore: its agent's git add -A committed
    # the memory file, which the user's checkout has, untracked, of its own.
    repo = make_repo(tmp_path / "repo")
    (repo / ".autopilot").mkdir()
    (repo / ".autopilot" / "memory.md").write_text("the checkout's\n")
    run_id, place = _worktree_run(tmp_path, repo)
    (place / ".autopilot").mkdir()
    (place / ".autopilot" / "memory.md").write_text("the run's\n")
    git(place, "add", "-A")
    git(place, "commit", "-q", "-m", "memory")
    before = git(repo, "rev-parse", "--short=12", "HEAD").strip()

    done = run_cli(["merge", run_id], cwd=repo)

    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[:2] == [
        f"merged autopilot/{run_id} into main (merge): 1 file changed, now at "
        f"{git(repo, 'rev-parse', '--short=12', 'HEAD').strip()} "
        f"(was {before})",
        ".autopilot/memory.md left out: autopilot's record of the run, not its work "
        f"(main keeps its own; it stays on autopilot/{run_id})",
    ]
    assert (repo / ".autopilot" / "memory.md").read_text() == "the checkout's\n"
    assert git(repo, "ls-files", ".autopilot") == ""
    assert (repo / "feature.txt").read_text() == "feature\n"


def test_diff_in_a_terminal_escapes_what_the_agent_wrote(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    run_id = recorded_run(tmp_path, repo, iterations=1)
    store = checkpoints_of(tmp_path / "runs" / run_id, open_repository(repo))
    (repo / "evil.txt").write_text("\x1b]52;c;aGk=\x07 clipboard\n")
    store.take_iteration(2)
    code, screen = _run_in_pty(["diff", run_id, "--iteration", "2"], tmp_path, {})
    assert code == 0, screen
    assert "\x1b]52" not in screen
    assert "\\x1b]52;c;aGk=\\x07 clipboard" in screen
    assert "\x1b[32m+\\x1b]52" in screen  # an added line, in green
    piped = run_cli(["diff", run_id, "--iteration", "2"], cwd=tmp_path)
    assert "+\x1b]52;c;aGk=\x07 clipboard" in piped.stdout  # raw when piped, for git apply


def _worktree_run(tmp_path: Path, repo: Path) -> tuple[str, Path]:
    """A finished --worktree run whose branch adds ``feature.txt``."""
    made, _ = create_worktree(open_repository(repo), tmp_path / "wt", "wt-1796000000000")
    (made.path / "feature.txt").write_text("feature\n")
    git(made.path, "add", "-A")
    git(made.path, "commit", "-q", "-m", "feature")
    run_id = make_run(
        tmp_path / "runs",
        "wt",
        1_796_000_000_000,
        terminal=("complete", "completion_promise"),
        state={"cwd": str(made.path), "worktree": made.to_json()},
    )
    return run_id, made.path


def test_a_failing_merge_verify_changes_nothing_and_says_why_in_one_line(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    run_id, _ = _worktree_run(tmp_path, repo)
    before = files_of(repo), user_git_state(repo)
    done = run_cli(
        ["merge", run_id, "--verify", "echo checking; echo '3 tests failed' >&2; exit 3"],
        cwd=repo,
    )
    assert done.returncode == 1, done.stderr
    log = tmp_path / "runs" / run_id / "check-merge-verify1.log"
    assert done.stderr == (
        "autopilot: error: merge --verify failed: $ echo checking; echo '3 tests failed' >&2; "
        f"exit 3: exit 3: …checking 3 tests failed; nothing was changed and autopilot/{run_id} "
        f"is kept (output: {log})\n"
    )
    assert (files_of(repo), user_git_state(repo)) == before
    assert git(repo, "rev-parse", "--verify", "--quiet", f"autopilot/{run_id}").strip()
    assert "merge" not in json.loads((tmp_path / "runs" / run_id / "state.json").read_text())
    assert git(repo, "worktree", "list", "--porcelain").count("worktree ") == 2


def test_merge_verify_runs_on_the_merge_result_before_the_branch_moves(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    run_id, place = _worktree_run(tmp_path, repo)
    seen = tmp_path / "seen"
    # A fast-forward: the run's own worktree already is the result.
    probe = f"test -f feature.txt && pwd > {seen} && git -C {repo} rev-parse HEAD >> {seen}"
    head = git(repo, "rev-parse", "HEAD").strip()
    done = run_cli(["merge", run_id, "--verify", probe], cwd=repo)
    assert done.returncode == 0, done.stderr
    tip = git(repo, "rev-parse", f"autopilot/{run_id}").strip()
    assert seen.read_text().split() == [str(place), head]  # the user's branch had not moved
    assert done.stdout.splitlines()[0] == (
        f"verified: $ {probe}: exit 0 (in {place}, at {tip[:12]})"
    )
    assert git(repo, "rev-parse", "HEAD").strip() == tip


def test_merge_verify_of_a_merge_commit_runs_in_a_temporary_tree_of_the_result(
    tmp_path: Path,
) -> None:
    repo = make_repo(tmp_path / "repo")
    run_id, place = _worktree_run(tmp_path, repo)
    (repo / "other.txt").write_text("the user's own work\n")
    git(repo, "add", "other.txt")
    git(repo, "commit", "-q", "-m", "other")
    seen = tmp_path / "seen"
    probe = f"test -f feature.txt && test -f other.txt && pwd > {seen}"
    done = run_cli(["merge", run_id, "--verify", probe], cwd=repo)
    assert done.returncode == 0, done.stderr
    where = Path(seen.read_text().strip())
    assert where not in (place, repo) and not where.exists()  # removed afterwards
    assert (repo / "feature.txt").exists() and (repo / "other.txt").exists()
    assert git(repo, "worktree", "list", "--porcelain").count("worktree ") == 2
    failing = run_cli(["merge", run_id, "--verify", "true", "--verify", " "], cwd=repo)
    assert failing.returncode == 2 and failing.stderr.endswith("--verify needs a command\n")


def test_an_iteration_that_changed_nothing_is_found_through_the_log(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    root = tmp_path / "runs"
    run_id = make_run(
        root, "work", now_ms(), terminal=("complete", "max_iterations"), state={"cwd": str(repo)}
    )
    taker = RunCheckpointer(repo, root / run_id)
    taken = [taker.baseline()]
    (repo / "step.txt").write_text("1\n")
    taken.append(taker.after_iteration(1, tree_key="after 1"))
    taken.append(taker.after_iteration(2, tree_key="after 1"))  # changed nothing
    with (root / run_id / "events.jsonl").open("a") as log:
        for facts in taken:
            assert facts is not None
            event = {"type": "checkpoint", "ts": now_ms(), "runId": run_id}
            log.write(json.dumps({**event, **facts.event_fields()}) + "\n")
    nothing = run_cli(["diff", run_id, "--iteration", "2"], cwd=tmp_path)
    assert (nothing.returncode, nothing.stdout) == (0, ""), nothing.stderr
    assert "+1" in run_cli(["diff", run_id, "--iteration", "1"], cwd=tmp_path).stdout
    (repo / "step.txt").write_text("later\n")
    done = run_cli(["restore", run_id, "--iteration", "2"], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[:2] == [
        "iteration 2 changed nothing: it shares checkpoint iter-0001",
        f"restored iter-0001 of run {run_id} in {repo}: 1 file (modified step.txt)",
    ]
    assert (repo / "step.txt").read_text() == "1\n"
    missing = run_cli(["restore", run_id, "--iteration", "3"], cwd=tmp_path)
    assert missing.returncode != 0 and "no checkpoint of iteration 3" in missing.stderr
