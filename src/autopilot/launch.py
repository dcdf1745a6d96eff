"""The ``autopilot`` console entry: a Stop hook with nothing armed is answered here,
before the command line (click and every command) is imported.

``autopilot hook claude-stop`` and ``autopilot hook codex-stop`` run on every stop of
every session in a project where the hook is installed; with no run armed they must
answer in about the time Python takes to start (docs/hooks.md, "Answer time"). The
everyday commands in their usual forms (``status``, ``list``, ``pause``, ``resume``,
``stop``, ``send``, ``--version``) run without click (``autopilot.cli.fast``); every
other command goes to ``autopilot.cli.main``.
"""

from __future__ import annotations

import os
import sys

HOOK_COMMANDS = ("claude-stop", "codex-stop")


def _stop_hook_agent(args: list[str]) -> str | None:
    """``claude`` or ``codex`` when ``args`` is exactly ``hook <agent>-stop``."""
    if len(args) == 2 and args[0] == "hook" and args[1] in HOOK_COMMANDS:
        return args[1].removesuffix("-stop")
    return None


_STDIN_CAP_BYTES = 4 << 20


def _drain_stdin() -> None:
    """Read stdin to its end (at most 4 MiB) and drop it."""
    try:
        fd = sys.stdin.fileno()
        read = 0
        while read < _STDIN_CAP_BYTES:
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                return
            read += len(chunk)
    except (OSError, ValueError, AttributeError):
        return


def _end_without_teardown(code: int) -> None:
    """Have the process end with ``code`` as soon as Python starts to finalize, once
    its output is flushed: a short command's ~150 modules and their objects would be
    torn down one by one for nothing (about 7% of ``status``). Registered last, the
    handler runs first among ``atexit``'s; nothing the fast commands load registers
    one (``tests/cli/test_startup_imports.py``)."""
    import atexit

    atexit.register(_exit_now, code)


def _exit_now(code: int) -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):  # closed, or a pipe its reader left
            pass
    os._exit(code)


def main() -> None:
    """Run the command line; answer an idle Stop hook at once.

    Raises:
        SystemExit: always, with the exit code.
    """
    agent = _stop_hook_agent(sys.argv[1:])
    if agent is not None:
        from autopilot.store.hook_armed import anything_armed, runs_root_quick

        root = runs_root_quick()
        if root is not None and not anything_armed(root):
            # Nothing armed: let the stop through (no output). Reading stdin first
            # spares the CLI a broken pipe while it is still writing the input.
            _drain_stdin()
            sys.exit(0)
        # Something is armed: the hook itself, still without the command line.
        from autopilot.core.vocabulary import HookAgent
        from autopilot.hook.stop import main as stop_main

        sys.exit(stop_main(HookAgent(agent)))
    from autopilot.cli.fast import fast_command, run_fast

    body = fast_command(sys.argv[1:])
    if body is not None:
        # A fast command reads and ends: the cyclic collector would only walk what it
        # read (every row of 10,000 runs, for ``list``) to find nothing to free.
        import gc

        gc.disable()
        code = run_fast(body)
        _end_without_teardown(code)
        sys.exit(code)
    from autopilot.store.bulk import CollectorOff

    with CollectorOff(freeze=True):  # see there
        from autopilot.cli.main import main as cli_main

    ending = _Ending()
    try:
        cli_main()
    except SystemExit as stop:
        ending.code = _exit_status(stop.code)
        raise
    except KeyboardInterrupt:  # Python's own ending: the status of a SIGINT
        raise
    except BaseException:
        ending.code = 1
        raise


class _Ending:
    """A command's end without the teardown of its modules: registered before the
    command runs, so that its handler runs last among ``atexit``'s, after every
    handler the command's libraries registered and after the threads that are not
    daemons ended; it flushes the output and ends the process with ``code``. A run's
    driver loads some 500 modules whose one-by-one teardown took about 15 ms, 2% of a
    100-iteration run. Every file autopilot writes is closed (and synced where it
    must be) before the command returns. None: Python ends as usual."""

    def __init__(self) -> None:
        import atexit

        self.code: int | None = None
        atexit.register(self._exit)

    def _exit(self) -> None:
        if self.code is not None:
            _exit_now(self.code)


def _exit_status(code: object) -> int:
    """The status Python gives for ``SystemExit(code)``: 0 for None, the number, or 1
    (a message, printed already)."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    return 1
