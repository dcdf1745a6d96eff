"""The everyday commands without click: ``--version``, ``status``, ``list``,
``stats``, ``pause``, ``resume``, ``stop`` and ``send`` in their usual forms are
parsed here and run the same bodies as the command line, so a person typing
``autopilot status`` does not wait for click and every command's module to load.

Only what click would accept in the same way is taken: the command's own flags and
its positional arguments. Anything else (``--help``, an unknown or misspelt option,
``--``, ``--file``, an option's missing value, a stream that is not UTF-8) returns None
and goes to the command line, which parses it and prints its usual help or error.
The output and the exit code are the command line's (``tests/cli/test_fast.py``
compares the two on the same inputs).
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # as typing's, without importing typing (``--version``)

if TYPE_CHECKING:
    from collections.abc import Callable

    Body = Callable[[], int]


def _split(
    args: list[str], flags: frozenset[str], valued: frozenset[str] = frozenset()
) -> tuple[set[str], dict[str, str], list[str]] | None:
    """``args`` as (flags given, options' values, positionals); None where click's own
    parsing is needed (an option it would refuse or explain, a repeated option)."""
    given: set[str] = set()
    values: dict[str, str] = {}
    positionals: list[str] = []
    rest = iter(args)
    for arg in rest:
        if arg.startswith("-") and arg != "-":
            if arg in flags and arg not in given:
                given.add(arg)
            elif arg in valued and arg not in values:
                value = next(rest, None)
                if value is None:
                    return None
                values[arg] = value
            else:
                return None
        else:
            positionals.append(arg)
    return given, values, positionals


def _status(args: list[str]) -> Body | None:
    parsed = _split(args, frozenset({"--json"}))
    if parsed is None or len(parsed[2]) > 1:
        return None
    given, _, positionals = parsed
    run_ref = positionals[0] if positionals else None

    def body() -> int:
        from autopilot.cli import control_body

        return control_body.status("--json" in given, run_ref)

    return body


def _control(name: str, args: list[str]) -> Body | None:
    parsed = _split(args, frozenset({"--now"}) if name == "stop" else frozenset())
    if parsed is None or len(parsed[2]) > 1:
        return None
    given, _, positionals = parsed
    run_ref = positionals[0] if positionals else None

    def body() -> int:
        from autopilot.cli import control_light

        if name == "stop":
            return control_light.stop("--now" in given, run_ref)
        if name == "pause":
            return control_light.pause(run_ref)
        return control_light.resume(run_ref)

    return body


def _list(args: list[str]) -> Body | None:
    parsed = _split(args, frozenset({"--json"}), frozenset({"--limit"}))
    if parsed is None or parsed[2]:
        return None
    given, values, _ = parsed

    def body() -> int:
        from autopilot.cli import list_body

        return list_body.list_runs("--json" in given, values.get("--limit"))

    return body


def _stats(args: list[str]) -> Body | None:
    parsed = _split(args, frozenset({"--json"}))
    if parsed is None or parsed[2]:
        return None
    given = parsed[0]

    def body() -> int:
        from autopilot.cli import stats_body

        return stats_body.stats("--json" in given)

    return body


def _send(args: list[str]) -> Body | None:
    parsed = _split(args, frozenset({"--no-start"}))
    if parsed is None:
        return None
    given, _, positionals = parsed

    def body() -> int:
        from autopilot.cli import send_body

        return send_body.send(None, "--no-start" in given, tuple(positionals))

    return body


def _version(args: list[str]) -> Body | None:
    if args:
        return None

    def body() -> int:
        from autopilot import __version__
        from autopilot.cli.echo import write_line

        write_line(f"autopilot {__version__}")
        return 0

    return body


_PARSERS: dict[str, Callable[[list[str]], Body | None]] = {
    "--version": _version,
    "status": _status,
    "list": _list,
    "pause": lambda args: _control("pause", args),
    "resume": lambda args: _control("resume", args),
    "stop": lambda args: _control("stop", args),
    "send": _send,
    "stats": _stats,
}


def fast_command(args: list[str]) -> Body | None:
    """What runs ``args`` (``sys.argv[1:]``) without click, or None for the command
    line to parse them."""
    if not args or args[0] not in _PARSERS or not _utf8(sys.stdout) or not _utf8(sys.stderr):
        return None
    return _PARSERS[args[0]](args[1:])


def _utf8(stream: object) -> bool:
    encoding = getattr(stream, "encoding", None)
    return isinstance(encoding, str) and encoding.lower().replace("-", "") == "utf8"


def run_fast(body: Body) -> int:
    """Run ``body`` as the command line runs a command: its exit code, or the one
    line and exit code of what it raised (``cli.failures``; Ctrl-C is 130).

    Raises:
        BaseException: what ``cli.failures.exit_code_for`` re-raises.
    """
    try:
        return body()
    except (EOFError, KeyboardInterrupt):
        # As click ends a command that meets them: a blank line (after the
        # terminal's ``^C``), then the command line's one line (``cli.main``).
        from autopilot.cli.echo import write_line
        from autopilot.cli.failures import error_line

        write_line("", err=True)
        error_line("autopilot: interrupted")
        return 130
    except Exception as error:
        from autopilot.cli.failures import exit_code_for

        return exit_code_for(error)
