"""What a command that failed prints and exits with, with or without click.

An ``AutopilotError`` is ``autopilot: error: <message>`` with its exit code; an
``OSError`` that escapes (a full disk) is ``autopilot: error: <strerror>: <file>``
with exit 4; a closed stdout ends quietly with 0; Ctrl-C is 130; anything else is
``autopilot: internal error: …`` with exit 1 (``AUTOPILOT_DEBUG=1`` re-raises it for
the traceback). Each is one line on stderr, never a traceback.
"""

from __future__ import annotations

import os
import sys

from autopilot.cli.echo import silence, write_line
from autopilot.errors import AutopilotError, EnvironmentProblem
from autopilot.view.safe import shown

_MAX_ERROR_CHARS = 1000


def one_line(text: str) -> str:
    """``text`` with its line breaks flattened and cut, so an error is one line."""
    line = " ".join(text.splitlines()).strip()
    return line if len(line) <= _MAX_ERROR_CHARS else line[: _MAX_ERROR_CHARS - 1] + "…"


def error_line(message: str) -> None:
    """Print ``message`` on stderr as one safe line."""
    write_line(shown(one_line(message)), err=True)


def _describe_os_error(error: OSError) -> str:
    """``<strerror>: <filename>`` (as ``open`` and ``write`` report it)."""
    detail = error.strerror or str(error) or type(error).__name__
    if error.filename is not None:
        detail += f": {os.fsdecode(error.filename)}"
    if error.filename2 is not None:
        detail += f" -> {os.fsdecode(error.filename2)}"
    return detail


def _quiet_stdout() -> None:
    """Flush stdout, or point it at /dev/null if it cannot take more.

    After a full disk or a closed pipe the interpreter's own flush at exit would
    print a second error; with nothing left to flush, it prints none.
    """
    try:
        sys.stdout.flush()
    except (OSError, ValueError):
        silence(sys.stdout)


def exit_code_for(error: BaseException) -> int:
    """Report ``error`` (as the module says) and give the command's exit code.

    Raises:
        BaseException: ``error`` itself when it is neither an ``Exception`` nor a
            ``KeyboardInterrupt``, or with ``AUTOPILOT_DEBUG=1`` when it is
            unexpected.
    """
    if isinstance(error, KeyboardInterrupt):
        return 130
    if isinstance(error, AutopilotError):
        error_line(f"autopilot: error: {error}")
        return error.exit_code
    if isinstance(error, BrokenPipeError):
        _quiet_stdout()
        return 0
    if isinstance(error, OSError):
        _quiet_stdout()
        error_line(f"autopilot: error: {_describe_os_error(error)}")
        return EnvironmentProblem.exit_code
    if not isinstance(error, Exception) or os.environ.get("AUTOPILOT_DEBUG", "") not in ("", "0"):
        raise error
    error_line(
        f"autopilot: internal error: {type(error).__name__}: {error} "
        "(set AUTOPILOT_DEBUG=1 for the traceback)"
    )
    return 1
