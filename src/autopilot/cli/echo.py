"""How every command prints: through ``view.safe``, so nothing an agent wrote can
drive the terminal and no well-known secret is shown.

A closed stdout or stderr (``autopilot run … | head -1``) never ends a command: the
first broken pipe points the stream at ``/dev/null`` and later lines to it are
dropped, so a foreground run goes on to its real end and exit code.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # as typing's, without importing typing (``--version``)

if TYPE_CHECKING:
    from typing import IO, Any

_closed: set[str] = set()
"""The streams (``stdout``, ``stderr``) a broken pipe has closed."""


def say(text: str = "", *, err: bool = False) -> None:
    """Print ``text`` (lines kept) with secrets redacted and controls escaped."""
    from autopilot.view.safe import shown  # not for ``--version``

    write_line(shown(text, newlines=True), err=err)


def say_json(value: Any, *, indent: int | None = None) -> None:
    """Print ``value`` as JSON, redacted, with controls ``\\u``-escaped."""
    from autopilot.view.safe import shown_json

    write_line(shown_json(value, indent=indent))


def write_line(text: str, *, err: bool = False) -> None:
    """Write ``text`` and a newline to stdout (or stderr) as it is, and flush; a
    broken pipe closes the stream for good (``silence``). The text must already be
    safe to show (``shown``): as ``click.echo`` would, it reaches the stream whole,
    since it holds no escape sequence to strip."""
    name = "stderr" if err else "stdout"
    stream = sys.stderr if err else sys.stdout
    if name in _closed or stream is None:
        return
    try:
        try:
            stream.write(text + "\n")
        except UnicodeEncodeError:
            _write_utf8(stream, text + "\n")
        stream.flush()
    except BrokenPipeError:
        _closed.add(name)
        silence(stream)


def _write_utf8(stream: IO[str], text: str) -> None:
    """Write ``text`` as UTF-8 to the bytes under ``stream``, whose own encoding cannot
    hold it (``PYTHONIOENCODING=ascii``, a Latin-1 locale): as ``click.echo`` writes
    to an ASCII stream, rather than failing the command.

    Raises:
        UnicodeEncodeError: ``stream`` has no bytes under it.
    """
    buffer = getattr(stream, "buffer", None)
    if buffer is None:
        raise UnicodeEncodeError("utf-8", text, 0, len(text), "the stream takes no bytes")
    stream.flush()
    buffer.write(text.encode("utf-8", "replace"))


def silence(stream: IO[str]) -> None:
    """Point ``stream``'s descriptor at ``/dev/null`` after a broken pipe.

    What is left in its buffer then goes nowhere, and the interpreter's own flush at
    exit prints no second error.
    """
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, stream.fileno())
        finally:
            os.close(devnull)
        stream.flush()
    except (OSError, ValueError):
        pass
