"""``autopilot hook claude-stop`` / ``codex-stop`` once something is armed: read the
hook's input, find the run armed for this session, decide, record, answer.

Whatever goes wrong here lets the session stop: a hook that fails must not trap a
user's session. The reason goes to stderr as one line (the CLI shows a hook's
stderr to the user), never a traceback, and no state file is deleted.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

from autopilot.core.structs import replace
from autopilot.core.vocabulary import EventType, HookAgent
from autopilot.errors import AutopilotError
from autopilot.hook.decide import (
    FLUSH_WAIT_SECONDS,
    LetStopReason,
    StopAction,
    StopFacts,
    block_cap_from,
    claim_expired,
    decide_stop,
    match_arming,
)
from autopilot.hook.inputs import HookInput, HookInputError, let_stop, parse_hook_input
from autopilot.hook.run_read import read_run
from autopilot.hook.transcript import TurnView, read_turn
from autopilot.loop.clock import Clock, SystemClock
from autopilot.loop.identity import parent_pid, process_identity
from autopilot.store.events import EventLog
from autopilot.store.hook_registry import (
    Arming,
    CliProcess,
    load_armings,
    locked,
    remove_arming,
    write_arming,
)
from autopilot.store.paths import runs_root
from autopilot.store.project_files import is_off
from autopilot.store.rundir import RunDir
from autopilot.store.state import StateStore

MAX_INPUT_BYTES = 4 << 20
_POLL_SECONDS = 0.1


def _read_input() -> bytes:
    data = bytearray()
    fd = sys.stdin.fileno()
    while len(data) <= MAX_INPUT_BYTES:
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            break
        data += chunk
    return bytes(data)


def _note(line: str) -> None:
    print(f"autopilot: {' '.join(line.split())}", file=sys.stderr)


def _claim(root: Path, arming: Arming, hook: HookInput, clock: Clock) -> Arming:
    claimed = replace(arming, session_id=hook.session_id)
    write_arming(root, claimed)
    log = EventLog(RunDir(root / arming.run_id).events, arming.run_id, clock.now_ms)
    try:
        log.emit(
            EventType.HOOK_SESSION,
            sessionId=hook.session_id,
            agent=hook.agent.value,
            how="claimed",
            note=f"claimed by the first stop of a {hook.agent.value} session in {hook.cwd}",
        )
    finally:
        log.close()
    return claimed


def _forget_ended(root: Path, armings: list[Arming], clock: Clock) -> None:
    """Drop the entries of runs that ended without a Stop of their session (stopped
    from another terminal) or whose folder is gone (deleted), and end the runs no
    session claimed in time (``hook.control.expire_unclaimed``, unless a Stop being
    answered holds the registry): the idle hook then answers at once again."""
    ended = [a.run_id for a in armings if read_run(root, a.run_id).armed_no_more]
    if ended:
        with locked(root):
            for run_id in ended:
                remove_arming(root, run_id)
    if any(claim_expired(a, clock.now_ms()) for a in armings):
        from autopilot.hook.control import expire_unclaimed

        expire_unclaimed(root, clock, wait_seconds=0)


def _turn(hook: HookInput) -> TurnView | None:
    return read_turn(hook.agent, hook.transcript_path) if hook.transcript_path else None


def answer_stop(
    agent: HookAgent,
    data: bytes,
    *,
    clock: Clock | None = None,
    environ: Mapping[str, str] | None = None,
    state_store: Callable[[Path], StateStore] = StateStore,
) -> str:
    """The answer to one Stop hook call (stdout text; "" lets the session stop).

    Args:
        agent: The CLI that called.
        data: The hook's stdin.
        clock: Wall and monotonic time and the flush wait's sleep (default: the
            system's).
        environ: The hook's environment (the CLI's block cap).
        state_store: Opens a run's ``state.json`` (``hook.iteration.HookStop``).
    """
    clock = clock or SystemClock()
    environ = os.environ if environ is None else environ
    try:
        hook = parse_hook_input(agent, data)
    except HookInputError as error:
        _note(f"{error}; letting the session stop")
        return let_stop()
    try:
        root = runs_root(create=False)
    except AutopilotError as error:
        _note(f"{error}; letting the session stop")
        return let_stop()
    armings, problems = load_armings(root)
    for problem in problems:
        _note(problem)
    if match_arming(hook, armings, clock.now_ms()) is None:
        _forget_ended(root, armings, clock)
        return let_stop()
    with locked(root):
        armings, _ = load_armings(root)  # again, under the lock
        match = match_arming(hook, armings, clock.now_ms())
        if match is None:
            return let_stop()
        arming = match.arming
        if match.claims:
            arming = _claim(root, arming, hook, clock)
        return _answer(root, arming, hook, clock, environ, state_store)


def _answer(
    root: Path,
    arming: Arming,
    hook: HookInput,
    clock: Clock,
    environ: Mapping[str, str],
    state_store: Callable[[Path], StateStore],
) -> str:
    from autopilot.hook.iteration import HookStop

    run = read_run(root, arming.run_id)
    facts = StopFacts(
        hook=hook,
        arming=arming,
        run=run,
        off=is_off(Path(arming.project)),
        turn=_turn(hook),
        block_cap=block_cap_from(hook.agent, dict(environ)),
    )
    decision = decide_stop(facts)
    deadline = clock.monotonic() + FLUSH_WAIT_SECONDS
    while decision.action is StopAction.WAIT:
        if clock.monotonic() >= deadline:
            facts = replace(facts, waited=True)
        else:
            clock.sleep(_POLL_SECONDS)
            facts = replace(facts, turn=_turn(hook))
        decision = decide_stop(facts)
    if decision.reason is LetStopReason.NOT_STOP_EVENT:
        return let_stop()
    if decision.reason is LetStopReason.RUN_MISSING:
        _note(f"run {arming.run_id}: {run.problem}; it is no longer armed, and the session stops")
        remove_arming(root, arming.run_id)
        return let_stop()
    if decision.reason is LetStopReason.STATE_UNREADABLE:
        _note(
            f"run {arming.run_id}: {run.problem}; letting the session stop "
            "(the file is left as it is: autopilot doctor or status says more)"
        )
        return let_stop()
    stop = HookStop(root, arming, clock, state_store)
    try:
        outcome = stop.handle(decision, facts.turn)
    finally:
        stop.close()
    if outcome.arming is None:
        remove_arming(root, arming.run_id)
    else:
        seen = replace(
            outcome.arming,
            transcript_path=hook.transcript_path or outcome.arming.transcript_path,
            last_stop_at_ms=clock.now_ms(),
            cli=session_cli() or outcome.arming.cli,
        )
        write_arming(root, seen)
    return outcome.answer


_SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "mksh", "fish", "busybox"})
_MAX_SHELLS = 3


def session_cli(pid: int | None = None) -> CliProcess | None:
    """The agent CLI process that ran this hook: the nearest ancestor of ``pid``
    (default: this process) that is not a shell (a CLI may run the hook through
    ``sh -c``), or None when it cannot be told."""
    current = os.getpid() if pid is None else pid
    for _ in range(_MAX_SHELLS + 1):
        parent = parent_pid(current)
        if parent is None or parent == 1:
            return None
        identity = process_identity(parent)
        if identity is None:
            return None
        program = (identity.command or "").split(" ", 1)[0]
        if os.path.basename(program).lstrip("-") not in _SHELLS:
            return CliProcess(parent, identity.start_time, identity.command)
        current = parent
    return None


def main(agent: HookAgent) -> int:
    """Read stdin, answer on stdout; always exit 0 (the answer is in the output)."""
    try:
        data = _read_input()
        text = answer_stop(agent, data)
    except OSError as error:
        where = f" ({error.filename})" if error.filename else ""
        _note(f"{error.strerror or error}{where}; letting the session stop")
        return 0
    except AutopilotError as error:
        _note(f"{error}; letting the session stop")
        return 0
    except Exception as error:
        if os.environ.get("AUTOPILOT_DEBUG", "") not in ("", "0"):
            raise
        _note(f"internal error: {type(error).__name__}: {error}; letting the session stop")
        return 0
    if text:
        sys.stdout.write(text)
        sys.stdout.flush()
    return 0
