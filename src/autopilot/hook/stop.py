"""``autopilot hook claude-stop`` / ``codex-stop`` once something is armed: read the
hook's input, find the run armed for this session, and answer.

Whatever goes wrong here lets the session stop: a hook that fails must not trap a
user's session. The reason goes to stderr as one line (the CLI shows a hook's
stderr to the user), never a traceback, and no file is deleted.
"""

from __future__ import annotations

import os
import sys
import time

from autopilot.errors import AutopilotError
from autopilot.hook.decide import match_arming
from autopilot.hook.inputs import HookAgent, HookInputError, let_stop, parse_hook_input
from autopilot.hook.registry import load_armings
from autopilot.store.paths import runs_root

MAX_INPUT_BYTES = 4 << 20


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


def answer_stop(agent: HookAgent, data: bytes, now_ms: int) -> str:
    """The answer to one Stop hook call (stdout text; "" lets the session stop).

    Args:
        agent: The CLI that called.
        data: The hook's stdin.
        now_ms: The current epoch time in ms.
    """
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
    match = match_arming(hook, armings, now_ms)
    if match is None:
        return let_stop()
    _note(
        f"run {match.arming.run_id} is armed for this session, but this version of "
        "autopilot cannot continue hook runs; letting the session stop"
    )
    return let_stop()


def main(agent: HookAgent) -> int:
    """Read stdin, answer on stdout; always exit 0 (the answer is in the output)."""
    try:
        data = _read_input()
    except (OSError, ValueError) as error:
        _note(f"cannot read the hook input: {error}; letting the session stop")
        return 0
    text = answer_stop(agent, data, time.time_ns() // 1_000_000)
    if text:
        sys.stdout.write(text)
        sys.stdout.flush()
    return 0
