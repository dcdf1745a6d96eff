"""``autopilot run``, ``start`` (relaunch a run left active) and ``demo``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from autopilot import control
from autopilot.agents.base import AgentAdapter
from autopilot.agents.registry import AGENT_NAMES, make_adapter
from autopilot.cli.echo import say
from autopilot.config import RunConfig, build_config
from autopilot.core.ending import RunResult
from autopilot.errors import RunLockedError, UsageError
from autopilot.loop.approved import prepare_boundary
from autopilot.loop.arming import arm_run
from autopilot.loop.clock import SystemClock
from autopilot.runtime.agents import adapter_for_state
from autopilot.runtime.drive import drive as runtime_drive
from autopilot.runtime.drive import ending_line, result_of
from autopilot.runtime.liveness import driver_alive, supervisor_alive
from autopilot.runtime.locks import ProjectLock
from autopilot.store.backlog import Backlog
from autopilot.store.files import read_prompt_file
from autopilot.store.paths import list_run_ids, resolve_run, run_dir, runs_root
from autopilot.store.project_files import is_off
from autopilot.store.run_state import PromptSource
from autopilot.store.rundir import RunDir
from autopilot.store.state import read_state, read_state_quietly
from autopilot.workspace.git import is_repository, work_tree_root
from autopilot.workspace.worktrees import RunWorktree

_LIMIT_OPTIONS = (
    "max-iterations",
    "min-iterations",
    "max-cost",
    "max-tokens",
    "max-duration",
    "iteration-timeout",
    "idle-timeout",
    "result-grace",
    "completion-promise",
    "abort-promise",
    "completion-match",
    "stagnation-limit",
    "model",
    "label",
    "prompt-via",
)


def _limit_options(func: Any) -> Any:
    helps = {
        "max-iterations": "Iteration budget (default 10; 0 = unlimited, explicitly).",
        "min-iterations": "Promises are not honoured before this many iterations.",
        "max-cost": "Cost budget in USD.",
        "max-tokens": "Token budget (input + output).",
        "max-duration": "Active time budget, e.g. 2h or 1h30m (paused time excluded).",
        "iteration-timeout": "Wall-clock limit per iteration, e.g. 45m (default 30m).",
        "idle-timeout": "Limit on an iteration's time without output, e.g. 5m (default 10m).",
        "result-grace": "Wait after the agent's final result before ending it (default 5s).",
        "completion-promise": "Token that completes the run (default COMPLETE).",
        "abort-promise": "Token that aborts the run.",
        "completion-match": (
            "sentence (default: the token as a sentence of its own, or <promise>TOKEN</promise>), "
            "word (a whole word), tag (the tag only) or substring."
        ),
        "stagnation-limit": "Iterations without progress that halt the run (default 3; 0 = off).",
        "model": "Model name passed to the agent.",
        "label": "Label for the run id (default: the directory name).",
        "prompt-via": "command agent: stdin (default), arg or file.",
    }
    for name in reversed(_LIMIT_OPTIONS):
        option = click.option(
            f"--{name}", name.replace("-", "_"), metavar=_METAVARS[name], help=helps[name]
        )
        func = option(func)
    return func


_METAVARS = {
    "max-iterations": "N",
    "min-iterations": "N",
    "max-cost": "USD",
    "max-tokens": "N",
    "max-duration": "DURATION",
    "iteration-timeout": "DURATION",
    "idle-timeout": "DURATION",
    "result-grace": "DURATION",
    "completion-promise": "TOKEN",
    "abort-promise": "TOKEN",
    "completion-match": "sentence|word|tag|substring",
    "stagnation-limit": "N",
    "model": "MODEL",
    "label": "LABEL",
    "prompt-via": "stdin|arg|file",
}
"""What each option takes, as the README's table names it."""


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "none"
    if seconds >= 3600:
        return f"{seconds / 3600:g}h"
    return f"{seconds / 60:g}m" if seconds >= 60 else f"{seconds:g}s"


def _print_limits(run_id: str, config: RunConfig, folder: Path) -> None:
    maximum = str(config.max_iterations) if config.max_iterations else "unlimited"
    model = f", model {config.model}" if config.model else ""
    cost = f"${config.max_cost_usd:g}" if config.max_cost_usd is not None else "none"
    abort = f", abort promise {config.abort_promise}" if config.abort_promise else ""
    say(f"autopilot: run {run_id} (agent {config.agent}{model})")
    say(
        f"autopilot: limits: iterations {config.min_iterations}..{maximum}, cost {cost}, "
        f"tokens {config.max_tokens or 'none'}, "
        f"duration {_duration(config.max_duration_seconds)}, "
        f"iteration timeout {_duration(config.iteration_timeout_seconds)}, "
        f"idle timeout {_duration(config.idle_timeout_seconds)}"
    )
    say(
        f"autopilot: completion promise {config.completion_promise} "
        f"({config.completion_match}){abort}, "
        f"stagnation limit {config.stagnation_limit or 'off'}, context {config.context}"
    )
    if config.env_exclude:
        say(
            "autopilot: agent environment without "
            f"{', '.join(config.env_exclude)} (except what the agent's CLI needs)"
        )
    if config.notify:
        from autopilot.runtime.notify import redact

        say(f"autopilot: notify {', '.join(redact(url) for url in config.notify)}")
    if config.checkpoints == "off":
        say("autopilot: checkpoints off")
    if config.verify:
        say(f"autopilot: a completion promise counts once these pass: {'; '.join(config.verify)}")
    say(f"autopilot: files in {folder}")
    if not config.max_iterations:
        say(
            "autopilot: warning: no iteration limit (--max-iterations 0): the run stops only "
            "by promise, stagnation, budget or stop",
            err=True,
        )


def backlog_prompt_source(cwd: Path) -> str:
    """Check the project's backlog before a ``--backlog`` run; returns the run's prompt
    note (the prompts themselves are composed per work item).

    Raises:
        UsageError: no ``.autopilot/tasks.jsonl``, no work item in it, or a line that
            is not one (named with its number).
    """
    backlog = Backlog(cwd, runs_root() / ".locks").read()
    if not backlog.exists or not backlog.entries:
        raise UsageError(
            "no work items in .autopilot/tasks.jsonl: add some with autopilot tasks add "
            "PROMPT (or autopilot tasks import FILE)"
        )
    if backlog.malformed:
        raise UsageError(f"fix it first: {backlog.malformed[0].describe()}")
    return "work items of .autopilot/tasks.jsonl (the prompt is composed per item)"


def _boundary(cwd: Path, *, approve: bool, steps: int, surfaces: tuple[str, ...]) -> None:
    """Check (or with ``approve`` write) the project's approved run boundary."""
    items = Backlog(cwd, runs_root() / ".locks").read().items
    item_surfaces = [path for item in items for path in item.allowed_surface]
    boundary = prepare_boundary(
        cwd, approve=approve, steps=steps, surfaces=surfaces, item_surfaces=item_surfaces
    )
    if boundary is not None:
        say(
            f"autopilot: approved run boundary: {boundary.remaining_steps} steps, "
            f"allowed surfaces {', '.join(boundary.allowed_surfaces)}"
        )


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
    """Drive a run here (``runtime.drive``), print how it ended; returns the exit code."""
    result = runtime_drive(root, run_id, adapter, echo=say, plain=plain, project_lock=project_lock)
    _print_result(result, replay_hint=replay_hint)
    return result.exit_code


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
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
    "--worktree",
    is_flag=True,
    help="Work in a new git worktree on branch autopilot/<run id>; your checkout is "
    "never written (merge it back with autopilot merge).",
    "--verify",
    "verify",
    metavar="CMD",
    multiple=True,
    help="A shell command that must exit 0 before a completion promise counts; repeatable.",
)
@_limit_options
def run(
    agent: str | None,
    prompt_text: str | None,
    prompt_file: str | None,
    backlog: bool,
    approve: bool,
    surfaces: tuple[str, ...],
    context: str | None,
    plain: bool,
    env_exclude: tuple[str, ...],
    detach: bool,
    notify: tuple[str, ...],
    no_checkpoints: bool,
    worktree: bool,
    verify: tuple[str, ...],
    **limits: str | None,
) -> int:
    """Start a run in this directory: iterate the agent until the run ends.

    Agent arguments go after `--`; for `--agent command` that is the program:
    autopilot run --agent command -p TEXT -- PROGRAM [ARGS...]
    """
    obj = click.get_current_context().find_root().obj
    extra: tuple[str, ...] = obj.get("extra", ()) if isinstance(obj, dict) else ()
    given_prompts = sum(x is not None for x in (prompt_text, prompt_file)) + int(backlog)
    if given_prompts != 1:
        raise UsageError("give exactly one of -p TEXT, -f FILE or --backlog")
    if verify and backlog:
        raise UsageError("--verify is for prompt runs: a backlog item's criteria carry checks")
    if (approve or surfaces) and not backlog:
        raise UsageError("--approve and --surface are for backlog runs (--backlog)")
    if surfaces and not approve:
        raise UsageError("--surface goes with --approve")
    cwd = Path.cwd().resolve()
    if backlog:
        source = PromptSource(text=backlog_prompt_source(cwd))
    elif prompt_file is not None:
        given = Path(prompt_file).expanduser()
        try:
            # A bounded regular file only: a repository can plant a FIFO or a link to
            # /dev/zero under the name the user types.
            text = read_prompt_file(given, project=cwd)
        except OSError as error:
            raise UsageError(
                f"cannot read prompt file {prompt_file}: {error.strerror or error}"
            ) from None
        if not text.strip():
            raise UsageError(f"prompt file {prompt_file} is empty")
        # Re-read every iteration (edit it mid-run).
        source = PromptSource(path=given.resolve())
    else:
        assert prompt_text is not None
        if not prompt_text.strip():
            raise UsageError("the prompt is empty")
        source = PromptSource(text=prompt_text)
    flags = {name: limits.get(name.replace("-", "_")) for name in _LIMIT_OPTIONS}
    flags["agent"] = agent
    flags["context"] = context
    flags["env-exclude"] = ",".join(env_exclude) if env_exclude else None
    flags["notify"] = " ".join(notify) if notify else None
    flags["checkpoints"] = "off" if no_checkpoints else None
    flags["verify"] = "\n".join(verify) if verify else None
    config = build_config(flags, project=cwd)
    if config.notify:
        from autopilot.runtime.notify import check_urls

        check_urls(config.notify)
    command = extra if config.agent == "command" else ()
    agent_args = () if config.agent == "command" else extra
    adapter = make_adapter(config.agent, command=command, prompt_via=config.prompt_via)
    adapter.check_installed()
    if config.context == "continue" and not adapter.supports_sessions:
        raise UsageError(f"--continue needs an agent with sessions; {config.agent} has none")
    root = runs_root()
    top = work_tree_root(cwd)
    if (root == top or top in root.parents) and is_repository(cwd):
        raise UsageError(
            f"the runs root {root} is inside the work tree; an agent could delete it and "
            "its writes would count as progress: set AUTOPILOT_RUNS_DIR elsewhere"
        )
    if backlog:
        _boundary(cwd, approve=approve, steps=config.max_iterations, surfaces=surfaces)
    if worktree:
        # A new worktree of its own: no other run can hold it, and the checkout's own
        # run (if any) is not in its way.
        run_id = arm_run(
            root,
            config,
            source,
            cwd,
            SystemClock(),
            extra_args=agent_args,
            command=command,
            worktree=True,
            mode="backlog" if backlog else "prompt",
        )
        state = read_state(RunDir(run_dir(root, run_id)).state)
        place = RunWorktree.from_json(state.extra.get("worktree"))
        assert state.cwd is not None and place is not None
        say(f"autopilot: worktree {place.path} on branch {place.branch}")
        project_lock = ProjectLock(root, Path(state.cwd))
        project_lock.acquire()
    else:
        project_lock = ProjectLock(root, cwd)
        project_lock.acquire()  # before anything is created: a refused run leaves nothing
    try:
        if not worktree:
            run_id = arm_run(
                root,
                config,
                source,
                cwd,
                SystemClock(),
                extra_args=agent_args,
                command=command,
                mode="backlog" if backlog else "prompt",
            )
        _print_limits(run_id, config, run_dir(root, run_id))
        if not detach:
            return drive(root, run_id, adapter, plain=plain, project_lock=project_lock)
    finally:
        project_lock.release()
    return launch_detached(root, run_id)


def launch_detached(root: Path, run_id: str, *, adopt: int | None = None) -> int:
    """Start ``run_id``'s supervisor (which starts its daemon) and say how to follow it."""
    from autopilot.runtime.detach import spawn_supervisor

    supervisor = spawn_supervisor(root, run_id, adopt=adopt)
    folder = run_dir(root, run_id)
    daemon = _wait_for_daemon(folder) if adopt is None else adopt
    shown = f"daemon pid {daemon}, " if daemon else ""
    say(f"autopilot: run {run_id} goes on in the background ({shown}supervisor pid {supervisor})")
    say(f"autopilot: watch it:    autopilot watch {run_id}")
    say(f"autopilot: message it:  autopilot send {run_id} TEXT")
    say(f"autopilot: stop it:     autopilot stop {run_id}")
    return 0


_DAEMON_WAIT_SECONDS = 15.0


def _wait_for_daemon(folder: Path) -> int | None:
    """The daemon's pid once it has attached to the run (None if not within 15 s)."""
    import time

    deadline = time.monotonic() + _DAEMON_WAIT_SECONDS
    while time.monotonic() < deadline:
        state = read_state_quietly(RunDir(folder).state)
        if state is not None and (state.terminated or driver_alive(state)):
            return state.pid
        time.sleep(0.1)
    return None


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("run_ref", metavar="[RUN]", required=False)
@click.option(
    "--foreground",
    is_flag=True,
    help="Drive the run in this terminal (the live view) instead of in the background.",
)
@click.option(
    "--plain", is_flag=True, help="Drive it in this terminal, one line per event (--foreground)."
)
def start(run_ref: str | None, foreground: bool, plain: bool) -> int:
    """Start RUN again: in the background, whatever its status (after a crash, a reboot,
    a pause). Returns at once.

    A pause request left over is cleared. Budgets, spend, iteration count, session ids
    and queued messages are restored; an iteration that was running is started again.
    A daemon still running is never doubled: if only its supervisor died, a new
    supervisor adopts it.
    """
    foreground = foreground or plain
    root = runs_root()
    run_id = resolve_run(root, run_ref, project=None if run_ref else Path.cwd().resolve())
    folder = run_dir(root, run_id)
    before = read_state(RunDir(folder).state)
    state = control.repair(folder, SystemClock())
    if state.terminated and not before.terminated:
        # It had ended: the crash came after its last decision was logged.
        result = result_of(state)
        say(ending_line(result) + " (repaired from the event log)")
        return result.exit_code
    if state.terminated:
        raise UsageError(f"run {run_id} has already ended ({state.termination_reason})")
    if state.cwd is None:
        raise UsageError(
            f"run {run_id} was written by another implementation and records no work tree; "
            "it cannot be relaunched"
        )
    daemon_alive = driver_alive(state)
    if daemon_alive and foreground:
        raise RunLockedError(f"run {run_id} is still being driven (pid {state.pid})")
    if state.paused:
        control.resume(folder, SystemClock())
        say(f"autopilot: {run_id}: the pause request left over is cleared")
    if is_off(Path(state.cwd)):
        say(
            "autopilot: autopilot is OFF in this project: the run holds at its next "
            "boundary until `autopilot on`",
            err=True,
        )
    if daemon_alive and state.pid is not None:
        if supervisor_alive(state):
            say(
                f"autopilot: run {run_id} is already running (daemon pid {state.pid}, "
                f"supervisor pid {state.supervisor_pid})"
            )
            return 0
        say(f"autopilot: adopting the running daemon of {run_id} (pid {state.pid})")
        return launch_detached(root, run_id, adopt=state.pid)
    adapter = adapter_for_state(state)
    adapter.check_installed()
    say(
        f"autopilot: relaunching {run_id} at iteration {state.iteration} "
        f"({state.spend.iterations} spent)"
    )
    if foreground:
        return drive(root, run_id, adapter, plain=plain)
    return launch_detached(root, run_id)


def relaunchable_runs(root: Path, project: Path | None) -> list[tuple[str, str | None]]:
    """Every run of ``project`` (None: every project) not ended, with why it must not
    be relaunched automatically (None: it should be; ``core.restart.relaunch_verdict``)."""
    from autopilot.core.restart import relaunch_verdict

    found = []
    for run_id in list_run_ids(root):
        state = read_state_quietly(RunDir(root / run_id).state)
        if state is None or state.terminated:
            continue
        if project is not None and state.cwd != str(project):
            continue
        why = relaunch_verdict(
            status=state.status.value,
            terminated=False,
            daemon_alive=driver_alive(state),
            supervisor_alive=supervisor_alive(state),
            off=is_off(Path(state.cwd or ".")),
        )
        found.append((run_id, why))
    return found


def relaunch_runs(project: Path | None) -> int:
    """Relaunch, detached, the runs left active in ``project`` (None: all); returns how
    many were relaunched. Runs that are not relaunched are listed with the reason."""
    root = runs_root(create=False)
    launched = 0
    for run_id, why in relaunchable_runs(root, project):
        if why is not None:
            say(f"autopilot: not relaunching {run_id}: {why}")
            continue
        state = control.repair(run_dir(root, run_id), SystemClock())
        if state.terminated:
            # A crash between the log's terminal event and state.json: repaired, not rerun.
            say(f"autopilot: run {run_id} had ended; its state.json now says so")
            continue
        say(f"autopilot: relaunching {run_id} at iteration {state.iteration}")
        launch_detached(root, run_id)
        launched += 1
    return launched


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--all", "all_projects", is_flag=True, help="Every project's runs, not this one's.")
def relaunch(all_projects: bool) -> int:
    """Relaunch runs left active (what bare `autopilot` does; the login service runs
    `autopilot relaunch --all`).

    A run whose status was running, planning, waiting or rate_limited goes on in the
    background; a paused, gated or ended run, or one whose daemon or supervisor is
    alive, is left alone, as is everything while autopilot is OFF in its project.
    """
    launched = relaunch_runs(None if all_projects else Path.cwd().resolve())
    if not launched:
        say("autopilot: no run to relaunch")
    return 0


def relaunch_active_run() -> int:
    """Bare ``autopilot``: relaunch this project's run that was left active, if any;
    otherwise show the help."""
    if relaunch_runs(Path.cwd().resolve()):
        return 0
    click.echo(click.get_current_context().get_help())
    return 0


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
