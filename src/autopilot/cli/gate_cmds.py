"""``autopilot answer [RUN] TEXT`` and ``autopilot approve [RUN]``: a person's word at a gate.

A backlog run whose agent asked a question (``ask_user_meta``), or whose next step
needs a person (every open work item blocked), waits with status ``awaiting_user``
and the question in ``state.json`` (``gate``). The answer is written there
(``gateAnswer``); the driver takes it at once, hands it to the blocked work item as
feedback for its next attempt, and goes on. A gated run is never relaunched on its
own: it waits for the answer.
"""

from __future__ import annotations

from pathlib import Path

import click

from autopilot.cli.echo import say
from autopilot.core.vocabulary import HOOK_MODE
from autopilot.errors import UsageError
from autopilot.runtime.liveness import driver_alive, supervisor_alive
from autopilot.store.paths import resolve_run, run_dir, runs_root
from autopilot.store.project_files import run_off_switch
from autopilot.store.run_state import RunState
from autopilot.store.rundir import RunDir
from autopilot.store.state import StateStore

_CTX = {"help_option_names": ["-h", "--help"]}
MAX_ANSWER_CHARS = 4000


def give_answer(folder: Path, text: str) -> RunState:
    """Write ``text`` as the answer to the run's gate.

    Raises:
        UsageError: the run has ended, waits for no answer or was answered already
            (of two answers at once, only the first is taken), or ``text`` is empty.
        StateFileError: state.json cannot be read or written.
    """
    cleaned = text.strip()
    if not cleaned:
        raise UsageError("the answer is empty")
    if len(cleaned) > MAX_ANSWER_CHARS:
        raise UsageError(f"the answer is longer than {MAX_ANSWER_CHARS} characters")

    def change(state: RunState) -> None:
        if state.terminated:
            raise UsageError(f"run {folder.name} has ended ({state.termination_reason})")
        if state.gate is None:
            raise UsageError(f"run {folder.name} is not waiting for an answer ({state.status})")
        if state.gate_answer is not None:
            # Two answers at once: the state lock orders them, the first is the one taken.
            raise UsageError(
                f"run {folder.name}: {state.gate!r} was already answered "
                f"({state.gate_answer!r}); the run takes that answer"
            )
        state.gate_answer = cleaned

    return StateStore(RunDir(folder).state).update(change)


def what_follows(state: RunState) -> str:
    """What follows an answer to ``state``'s run, truthfully: it goes on if a daemon
    (or its supervisor, or its agent session's Stop hook) drives it; otherwise it
    takes the answer once started again, which says how."""
    if state.mode == HOOK_MODE or driver_alive(state) or supervisor_alive(state):
        return "the run goes on"
    run_id = state.run_id
    if run_off_switch(state) is not None:
        return (
            "no daemon is running it and autopilot is OFF in its project: autopilot on, "
            f"then autopilot start {run_id} goes on with the answer"
        )
    return f"no daemon is running it: autopilot start {run_id} goes on with the answer"


def _folder(run_ref: str | None) -> Path:
    root = runs_root(create=False)
    run_id = resolve_run(root, run_ref, project=None if run_ref else Path.cwd().resolve())
    return run_dir(root, run_id)


@click.command(context_settings=_CTX)
@click.argument("words", metavar="[RUN] TEXT", nargs=-1, required=True)
def answer(words: tuple[str, ...]) -> int:
    """Answer the question RUN waits on (status awaiting_user), and let it go on."""
    if len(words) > 2:
        raise UsageError("give [RUN] TEXT, with TEXT quoted as one argument")
    run_ref, text = (words[0], words[1]) if len(words) == 2 else (None, words[0])
    folder = _folder(run_ref)
    state = give_answer(folder, text)
    note = answered_items(state)
    said = f" ({note})" if note else ""
    say(f"autopilot: {folder.name}: answered {_shortened(text)!r}{said}; {what_follows(state)}")
    return 0


def _shortened(text: str, limit: int = 60) -> str:
    """``text`` on one line, cut to ``limit`` characters (``…`` ends a cut one)."""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def answered_items(state: RunState) -> str:
    """Which work items of ``state``'s backlog run the answer goes to
    (``core.gate_answer``), as the project's ``tasks.jsonl`` has them now: ``alpha,
    beta get more attempts``, ``for alpha``, or ``""`` (none, not a backlog run, or
    the file cannot be read)."""
    if state.mode != "backlog" or state.cwd is None:
        return ""
    from autopilot.core.gate_answer import answer_targets, answered_note
    from autopilot.errors import AutopilotError
    from autopilot.store.backlog import Backlog
    from autopilot.workspace.worktrees import RunWorktree, project_home

    try:
        home = project_home(Path(state.cwd), RunWorktree.from_json(state.extra.get("worktree")))
        items = Backlog(home, runs_root(create=False) / ".locks").read().items
    except (AutopilotError, OSError, ValueError):
        return ""
    return answered_note(answer_targets(items, state.gate))


@click.command(context_settings=_CTX)
@click.argument("run_ref", metavar="[RUN]", required=False)
def approve(run_ref: str | None) -> int:
    """Approve what RUN waits on (status awaiting_user), and let it go on."""
    folder = _folder(run_ref)
    state = give_answer(folder, "approved")
    note = answered_items(state)
    said = f" ({note})" if note else ""
    say(f"autopilot: {folder.name}: approved {state.gate!r}{said}; {what_follows(state)}")
    return 0
