"""``autopilot run``, ``start`` (relaunch a run left active) and ``demo``."""

from __future__ import annotations

import functools
import os
from pathlib import Path

import click

from autopilot.agents.base import AgentAdapter
from autopilot.agents.registry import AGENT_NAMES, make_adapter
from autopilot.cli.echo import say, write_line
from autopilot.cli.parallel_cmd import lanes_wanted, run_parallel
from autopilot.cli.run_limits import LIMIT_OPTIONS, limit_options, print_limits
from autopilot.cli.run_sources import (
    approve_boundary,
    check_prompt_passable,
    run_source,
    with_baked_defaults,
)
from autopilot.cli.short_options import ShortFirstCommand
from autopilot.config_sources import build_config
from autopilot.core.ending import RunResult
from autopilot.core.item_text import surface_problem
from autopilot.errors import UsageError
from autopilot.loop.arming import arm_run
from autopilot.loop.clock import SystemClock
from autopilot.loop.spawn import start_trial
from autopilot.runtime.locks import BACKLOG_MODE, LaunchLock, ProjectLock
from autopilot.runtime.run_result import ending_line
from autopilot.store.paths import run_dir, runs_root
from autopilot.store.rundir import RunDir
from autopilot.store.state import read_state
from autopilot.view.foreground import drive as drive_here
from autopilot.workspace.work_tree import is_repository, work_tree_root
from autopilot.workspace.worktrees import RunWorktree


def _print_result(result: RunResult, *, replay_hint: bool = True) -> None:
    say(ending_line(result))
    if replay_hint:
        say(f"autopilot: replay with: autopilot replay {result.run_id}")


def drive(
    root: Path,
    run_id: str,
    adapter: AgentAdapter,
    *,
    plain: bool = True,
    replay_hint: bool = True,
    project_lock: ProjectLock | None = None,
) -> int:
    """Drive a run here (``view.foreground``), print how it ended; returns the exit code."""
    result = drive_here(
        root, run_id, adapter, echo=write_line, plain=plain, project_lock=project_lock
    )
    _print_result(result, replay_hint=replay_hint)
    return result.exit_code


@click.command(cls=ShortFirstCommand, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--agent",
    "agent",
    metavar="NAME",
    help=f"Agent CLI: {', '.join(AGENT_NAMES)} (default claude).",
)
@click.option("-p", "--prompt", "prompt_text", metavar="TEXT", help="The prompt, as text.")
@click.option(
    "-f",
    "--prompt-file",
    "prompt_file",
    metavar="FILE",
    help="The prompt, from a file (re-read every iteration).",
)
@click.option(
    "--backlog",
    is_flag=True,
    help="Work through .autopilot/tasks.jsonl, one work item per iteration.",
)
@click.option(
    "--self-improve",
    "self_improve",
    is_flag=True,
    help="The baked self-improvement prompt: one verified improvement per iteration.",
)
@click.option(
    "--grow-project",
    "grow_project",
    is_flag=True,
    help="The baked backlog-grooming prompt: the agent adds work items to tasks.jsonl.",
)
@click.option(
    "--focus",
    metavar="TEXT",
    help="With --self-improve or --grow-project: what to narrow the work to.",
)
@click.option(
    "--approve",
    is_flag=True,
    help="With --backlog: write .autopilot/approved-run.json, the run's approved boundary "
    "(--max-iterations steps, the --surface paths).",
)
@click.option(
    "--surface",
    "surfaces",
    metavar="PATTERN",
    multiple=True,
    help="With --approve: a path the run may change (src/..., docs/*.md); repeatable "
    "(default: the work items' allowed_surface).",
)
@click.option(
    "--fresh", "context", flag_value="fresh", help="A new agent session every iteration (default)."
)
@click.option(
    "--continue", "context", flag_value="continue", help="Resume the first iteration's session."
)
@click.option(
    "--plain", is_flag=True, help="One line per event (the default when stdout is not a terminal)."
)
@click.option(
    "--env-exclude",
    "env_exclude",
    metavar="PATTERN",
    multiple=True,
    help="Drop environment variables matching this glob (e.g. 'AWS_*') from the agent's "
    "environment, except those its CLI needs; repeatable.",
)
@click.option(
    "--detach",
    is_flag=True,
    help="Run in the background under a supervisor; return at once.",
)
@click.option(
    "--notify",
    "notify",
    metavar="URL",
    multiple=True,
    help="Notify this apprise URL on completion, abort, gates, long limit waits (repeatable).",
)
@click.option(
    "--no-checkpoints",
    "no_checkpoints",
    is_flag=True,
    help="Take no checkpoints of the working tree (config: checkpoints = false).",
)
@click.option(
    "--worktree/--no-worktree",
    default=None,
    help="Work in a new git worktree on branch autopilot/<run id>; your checkout is "
    "never written (merge it back with autopilot merge).",
)
@click.option(
    "--parallel",
    "parallel",
    metavar="N",
    help="With --backlog: N agents at once, each in its own worktree, each completed "
    "work item merged into the run's branch autopilot/<run id>.",
)
@click.option(
    "--verify",
    "verify",
    metavar="CMD",
    multiple=True,
    help="A shell command that must exit 0 before a completion promise counts; repeatable.",
)
@limit_options
def run(
    agent: str | None,
    prompt_text: str | None,
    prompt_file: str | None,
    backlog: bool,
    self_improve: bool,
    grow_project: bool,
    focus: str | None,
    approve: bool,
    surfaces: tuple[str, ...],
    context: str | None,
    plain: bool,
    env_exclude: tuple[str, ...],
    detach: bool,
    notify: tuple[str, ...],
    no_checkpoints: bool,
    worktree: bool | None,
    parallel: str | None,
    verify: tuple[str, ...],
    **limits: str | None,
) -> int:
    """Start a run in this directory: iterate the agent until the run ends.

    Agent arguments go after `--`; for `--agent command` that is the program:
    autopilot run --agent command -p TEXT -- PROGRAM [ARGS...]
    """
    obj = click.get_current_context().find_root().obj
    extra: tuple[str, ...] = obj.get("extra", ()) if isinstance(obj, dict) else ()
    if verify and backlog:
        raise UsageError("--verify is for prompt runs: a backlog item's criteria carry checks")
    if (approve or surfaces) and not backlog:
        raise UsageError("--approve and --surface are for backlog runs (--backlog)")
    if surfaces and not approve:
        raise UsageError("--surface goes with --approve")
    for surface in surfaces:
        if (problem := surface_problem(surface)) is not None:
            raise UsageError(f"--surface: {problem}")
    lanes = lanes_wanted(parallel, backlog=backlog, worktree=worktree)
    cwd = Path.cwd().resolve()
    chosen = run_source(
        cwd,
        prompt_text=prompt_text,
        prompt_file=prompt_file,
        backlog=backlog,
        self_improve=self_improve,
        grow_project=grow_project,
        focus=focus,
    )
    flags = {name: limits.get(name.replace("-", "_")) for name in LIMIT_OPTIONS}
    flags["agent"] = agent
    flags["context"] = context
    flags["env-exclude"] = ",".join(env_exclude) if env_exclude else None
    flags["notify"] = " ".join(notify) if notify else None
    flags["checkpoints"] = "off" if no_checkpoints else None
    flags["verify"] = "\n".join(verify) if verify else None
    config = build_config(flags, project=cwd)
    if chosen.baked is not None:
        config = with_baked_defaults(config, chosen.baked)
    if config.notify:
        from autopilot.loop.notify import check_urls

        check_urls(config.notify)
    command = _program_from(cwd, extra) if config.agent == "command" else ()
    agent_args = () if config.agent == "command" else extra
    adapter = make_adapter(config.agent, command=command, prompt_via=config.prompt_via)
    adapter.check_installed()
    check_prompt_passable(adapter, chosen.source)
    if config.context == "continue" and not adapter.supports_sessions:
        raise UsageError(f"--continue needs an agent with sessions; {config.agent} has none")
    root = runs_root()
    top = work_tree_root(cwd)
    if (root == top or top in root.parents) and is_repository(cwd):
        raise UsageError(
            f"the runs root {root} is inside the work tree; an agent could delete it and "
            "its writes would count as progress: set AUTOPILOT_RUNS_DIR elsewhere"
        )
    home = cwd if chosen.mode == BACKLOG_MODE else None
    in_checkout = lanes is None and not worktree
    # Taken before anything is written, so a refused run leaves nothing behind (nor
    # touches an active run's approved-run.json): the checkout with its backlog; for a
    # parallel or --worktree run, whose work trees are new, the checkout's backlog
    # alone while the run is armed (then its drivers own it: ``runtime.locks``).
    claim = ProjectLock(root, cwd, backlog=home, work_tree=in_checkout)
    # The launch lock keeps a detached launch's window (its daemon not attached yet)
    # shut to every other launch into this work tree. A --worktree or parallel run
    # launches into work trees of its own, so runs started from one checkout at once
    # do not refuse each other (its detached launch locks its new worktree).
    launch_lock = LaunchLock(root, cwd)
    if in_checkout:
        launch_lock.acquire()
    try:
        claim.acquire()
    except BaseException:
        launch_lock.release()
        raise
    project_lock = claim
    try:
        if backlog:
            approve_boundary(cwd, approve=approve, steps=config.max_iterations, surfaces=surfaces)
        if lanes is not None:
            claim.release()
            launch_lock.release()  # its lanes work in worktrees of their own
            return run_parallel(
                root,
                config,
                chosen.source,
                cwd,
                lanes=lanes,
                extra_args=agent_args,
                command=command,
                detach=detach,
                show_limits=lambda run_id: print_limits(
                    run_id, config, run_dir(root, run_id), backlog=True
                ),
            )
        if not detach:  # this process drives it: its first spawn's wait begins now
            start_trial()
        arm = functools.partial(
            arm_run,
            root,
            config,
            chosen.source,
            cwd,
            SystemClock(),
            extra_args=agent_args,
            command=command,
            mode=chosen.mode,
        )
        if worktree:
            # A new worktree of its own: no other run can hold it, and the checkout's
            # own run (if any) is not in its way.
            run_id = arm(worktree=True)
            claim.release()
            state = read_state(RunDir(run_dir(root, run_id)).state)
            place = RunWorktree.from_json(state.extra.get("worktree"))
            assert state.cwd is not None and place is not None
            say(f"autopilot: worktree {place.path} on branch {place.branch}")
            project_lock = ProjectLock.of_run(root, state)
            project_lock.acquire(run_id=run_id)
        else:
            run_id = arm()
        print_limits(run_id, config, run_dir(root, run_id), backlog=chosen.mode == BACKLOG_MODE)
        if not detach:
            launch_lock.release()
            return drive(root, run_id, adapter, plain=plain, project_lock=project_lock)
    except BaseException:
        launch_lock.release()
        raise
    finally:
        project_lock.release()
        claim.release()
    from autopilot.cli.detached import launch_detached  # a run driven here needs none

    try:
        return launch_detached(root, run_id, launch_lock=launch_lock if in_checkout else None)
    finally:
        launch_lock.release()


def _program_from(cwd: Path, argv: tuple[str, ...]) -> tuple[str, ...]:
    """``argv`` with a relative program path (``../agent.sh``) made absolute against
    ``cwd``: the run's daemon, its relaunches and ``start`` work from other
    directories. A bare name (``my-agent``) is left to ``PATH``."""
    if not argv or "/" not in argv[0] or Path(argv[0]).is_absolute():
        return argv
    return (os.path.normpath(cwd / Path(argv[0]).expanduser()), *argv[1:])


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--dir",
    "directory",
    metavar="DIR",
    help="Where to make the demo repository (default: a new temp dir).",
)
@click.option("--plain", is_flag=True, help="One line per event instead of the live view.")
def demo(directory: str | None, plain: bool) -> int:
    """Run the built-in scripted agent through the real loop (no API key needed)."""
    from autopilot.demo import run_demo

    return int(run_demo(Path(directory) if directory else None, plain=plain))
