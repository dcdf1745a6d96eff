"""The body of ``autopilot send``, without click: the command line
(``cli.message_cmds``) and the fast path (``cli.fast``) both call it."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from autopilot.cli.echo import say
from autopilot.core.vocabulary import HOOK_MODE, RunStatus
from autopilot.errors import RunLockedError, StateFileError, UsageError
from autopilot.loop.clock import SystemClock
from autopilot.runtime.liveness import driver_alive, driver_running, supervisor_alive
from autopilot.store.paths import resolve_run, run_dir, runs_root
from autopilot.store.project_files import run_off_switch
from autopilot.store.run_files import STATE_FILE
from autopilot.store.state_file import read_state_view, read_state_view_quietly

# The typed state, the delivery model and the log's readers are loaded only where a
# run is not simply being driven: ended, its state unreadable, its driver gone.
TYPE_CHECKING = False  # as typing's, without importing typing at run time
if TYPE_CHECKING:
    from autopilot.store.run_state import RunState


def _read_text_file(name: str) -> str:
    """The message in file ``name`` (``-``: stdin), read no further than one character
    past the longest message, so ``/dev/zero`` or a huge file is refused, not loaded.

    Raises:
        UsageError: it cannot be read, or is longer than ``MAX_MESSAGE_CHARS``.
    """
    from autopilot.core.message_ids import MAX_MESSAGE_CHARS

    try:
        if name == "-":
            text = sys.stdin.read(MAX_MESSAGE_CHARS + 1)
        else:
            with Path(name).expanduser().open(encoding="utf-8", errors="replace") as file:
                text = file.read(MAX_MESSAGE_CHARS + 1)
    except OSError as error:
        raise UsageError(f"cannot read {name}: {error.strerror or error}") from None
    if len(text) > MAX_MESSAGE_CHARS:
        raise UsageError(
            f"{name} is longer than {MAX_MESSAGE_CHARS} characters, the most a message may be"
        )
    return text


def send(file_name: str | None, no_start: bool, args: tuple[str, ...]) -> int:
    """``autopilot send [--file F] [--no-start] [RUN] TEXT``; its exit code."""
    if file_name is not None:
        if len(args) > 1:
            raise UsageError("with --file, give at most RUN")
        run_ref = args[0] if args else None
        text = _read_text_file(file_name)
    elif len(args) == 1:
        run_ref, text = None, args[0]
    elif len(args) == 2:
        run_ref, text = args
    else:
        raise UsageError("give the message as TEXT (or --file F), optionally after RUN")
    root = runs_root(create=False)
    run_id = resolve_run(root, run_ref, project=None if run_ref else Path.cwd().resolve())
    folder = run_dir(root, run_id)
    if not _queued_for_its_driver(folder, text):
        from autopilot.loop.messages import queue_message
        from autopilot.manage.activity import settled_state
        from autopilot.store.state import read_state

        try:
            state = read_state(folder / STATE_FILE)
        except StateFileError as unreadable:
            return _send_unreadable(folder, text, unreadable)
        # A run whose log says it ended is not relaunched for a message (state.json
        # may not have been writable to say so).
        settled = settled_state(folder, state)
        if settled.terminated:
            raise _ended(run_id, settled)
        message = queue_message(folder, text, SystemClock())
        _say_queued(message.id, run_id)
    now = read_state_view_quietly(folder / STATE_FILE)  # reads as read_state does
    if now is not None and (driver_alive(now) or supervisor_alive(now)):
        return 0
    from autopilot.store.state import read_state

    state = read_state(folder / STATE_FILE)
    if state.mode == HOOK_MODE:
        say(
            f"autopilot: {run_id} runs in its agent session's Stop hook: the message goes "
            "with the next iteration that session starts"
        )
        return 0
    why = _why_not_relaunched(state, no_start)
    if why is not None:
        say(
            f"autopilot: no daemon is running {run_id} ({why}): the message is delivered "
            f"once the run goes on (autopilot start {run_id})"
        )
        return 0
    from autopilot.cli.detached import launch_detached

    say(f"autopilot: no daemon was running {run_id}: relaunching it to read the message")
    try:
        return launch_detached(root, run_id)
    except RunLockedError as busy:  # started meanwhile: the message waits on disk for it
        say(f"autopilot: {run_id} was not relaunched ({busy}); the message stays queued")
        return 0


def _say_queued(message_id: str, run_id: str) -> None:
    say(
        f"autopilot: message {message_id} queued for {run_id}; "
        "the agent gets it at its next iteration"
    )


def _queued_for_its_driver(folder: Path, text: str) -> bool:
    """Queue ``text`` for a run whose driver runs it (``driver_running``), its state
    read as plain JSON (``store.state_file``) and the message queued as
    ``queue_message`` queues it (``queue_message_json``); True once it is queued.
    False, with nothing done, for any other run (ended, unreadable, its driver not
    running it now), which ``settled_state`` and ``queue_message`` take.

    Raises:
        UsageError: ``text`` is not a message (``check_text``).
        StateFileError: the inbox or the log cannot be written.
    """
    from autopilot.core.message_ids import MessageKind, MessageSource
    from autopilot.store.inbox import check_text, new_message_id, queue_message_json

    try:
        state = read_state_view(folder / STATE_FILE)
        if state.terminated or driver_running(folder, state) is not True:
            return False
        check_text(text)
        state = read_state_view(folder / STATE_FILE)  # as queue_message reads it
    except StateFileError:
        return False
    if state.terminated:
        return False
    clock = SystemClock()
    now = clock.now_ms()
    ident = new_message_id(now)
    message = {
        "id": ident,
        "source": MessageSource.USER.value,
        "kind": MessageKind.MESSAGE.value,
        "text": text,
        "queuedAt": now,
    }
    on = run_off_switch(state) is None
    queue_message_json(folder, message, clock.now_ms, autopilot_on=on)
    _say_queued(ident, folder.name)
    return True


def _ended(run_id: str, state: RunState) -> UsageError:
    reason = state.termination_reason or state.status
    return UsageError(f"run {run_id} has already ended ({reason}); it takes no more messages")


def _send_unreadable(folder: Path, text: str, unreadable: StateFileError) -> int:
    """Queue ``text`` for a run whose ``state.json`` cannot be read: its log tells
    whether it ended and where it works (its OFF switch). A live driver writes the
    state again and takes the message; with none, the way out is said.

    Raises:
        StateFileError: ``unreadable``, when the log holds no run either.
        UsageError: the log says the run ended.
    """
    from autopilot.core.vocabulary import EventType
    from autopilot.loop.messages import queue_message
    from autopilot.manage.repair import state_from_log
    from autopilot.runtime.liveness import lock_holder
    from autopilot.store.events import read_events
    from autopilot.store.launch_record import launch_of
    from autopilot.store.rundir import RunDir

    run_id = folder.name
    events = list(read_events(RunDir(folder).events))
    armed = next((e for e in events if e["type"] == EventType.ARMED), None)
    if armed is None:
        raise unreadable
    logged = state_from_log(events, run_id, launch_of(armed, RunDir(folder)))
    if logged.terminated:
        raise _ended(run_id, logged)
    on = run_off_switch(logged) is None
    message = queue_message(folder, text, SystemClock(), autopilot_on=on)
    say(
        f"autopilot: message {message.id} queued for {run_id}; "
        "the agent gets it at its next iteration"
    )
    if lock_holder(folder) is None:
        say(
            f"autopilot: {unreadable}, and no daemon is running {run_id}: `autopilot doctor "
            f"--repair` rebuilds it, then `autopilot start {run_id}` delivers the message"
        )
    return 0


def _why_not_relaunched(state: RunState, no_start: bool) -> str | None:
    """Why ``send`` leaves a run with a dead daemon as it is, or None to relaunch it."""
    from autopilot.agents.environment import missing_agent_env
    from autopilot.errors import AgentNotFoundError
    from autopilot.runtime.agents import adapter_for_state

    if no_start:
        return "--no-start"
    if run_off_switch(state) is not None:
        return "autopilot is OFF in its project"
    if state.status in (RunStatus.GATED, RunStatus.AWAITING_USER):
        return f"it is {state.status.value}: it waits for your answer"
    missing = missing_agent_env(state.agent_env, os.environ)
    if missing:
        from autopilot.core.restart import env_missing_note  # only for this answer

        return env_missing_note(missing)
    try:
        adapter_for_state(state).check_installed()
    except AgentNotFoundError as error:
        return str(error)
    return None
