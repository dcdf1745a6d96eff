"""Text that is safe to show: secrets redacted, terminal controls escaped (pure).

Whatever an agent prints can reach a person's terminal through ``status``,
``list``, ``replay``, ``watch``, the live view, ``stats`` or an error message. A
terminal obeys control characters wherever they come from: an OSC 52 sequence
writes the clipboard, others set the window title, clear the screen or move the
cursor, and bidirectional overrides make text read differently from what it is.
Every place autopilot shows text passes it through ``shown`` (or ``shown_json``),
whether or not stdout is a terminal, so such characters are shown as visible
escapes (``\\x1b``, ``\\u202e``) and well-known secrets as ``[REDACTED]``.

Escaped: the C0 controls (U+0000–U+001F) except tab and, where the caller allows
it, newline; DEL; the C1 controls (U+0080–U+009F); the bidirectional marks,
embeddings, overrides and isolates (U+061C, U+200E, U+200F, U+202A–U+202E,
U+2066–U+2069); and the line and paragraph separators (U+2028, U+2029).
Escaping is idempotent: a backslash is left as it is.
"""

from __future__ import annotations

import json
import re

from autopilot.core.redact import redact, redact_value

TYPE_CHECKING = False  # as typing's, without importing typing at run time
if TYPE_CHECKING:
    from typing import Any

_ESCAPED_CODES: tuple[int, ...] = (
    *(code for code in range(0x20) if code not in (0x09, 0x0A)),
    0x7F,
    *range(0x80, 0xA0),
    0x061C,
    0x200E,
    0x200F,
    *range(0x202A, 0x202F),
    *range(0x2066, 0x206A),
    0x2028,
    0x2029,
)


def _escape(code: int) -> str:
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


_ANY_ESCAPED = re.compile("[" + "".join(map(chr, _ESCAPED_CODES)) + "]")
"""Finds any character ``escape_controls`` escapes (a newline aside): a search in C,
so text with none (nearly all) is not translated character by character."""

_ONE_LINE = {code: _escape(code) for code in (*_ESCAPED_CODES, 0x0A)}
_MULTI_LINE = {code: _escape(code) for code in _ESCAPED_CODES}
_JSON = {code: f"\\u{code:04x}" for code in _ESCAPED_CODES if code >= 0x7F}
"""JSON already escapes C0 controls; the rest become ``\\uXXXX`` (valid JSON)."""


def escape_controls(text: str, *, newlines: bool = False) -> str:
    """``text`` with terminal control characters shown as visible escapes.

    Args:
        text: Any text.
        newlines: Keep line breaks (multi-line output); otherwise they are
            escaped too, so the result is one line.

    Returns:
        Text without a character a terminal would act on (see the module docstring).
    """
    if _ANY_ESCAPED.search(text) is None and (newlines or "\n" not in text):
        return text
    return text.translate(_MULTI_LINE if newlines else _ONE_LINE)


def shown(text: str, *, newlines: bool = False) -> str:
    """``text`` as autopilot shows it: secrets redacted, controls escaped.

    Args:
        text: Any text, from an agent, a log, a state file or autopilot itself.
        newlines: Keep line breaks (see ``escape_controls``).
    """
    if newlines:
        text = text.replace("\r\n", "\n")
    return escape_controls(redact(text), newlines=newlines)


def shown_json(value: Any, *, indent: int | None = None) -> str:
    """``value`` as JSON for a terminal: strings redacted, controls ``\\u``-escaped.

    The result is valid JSON (``ensure_ascii=False``) that a JSON reader decodes
    to the redacted value, and holds no character a terminal would act on.

    Raises:
        TypeError: a value JSON cannot hold.
        ValueError: a circular reference.
    """
    text = json.dumps(redact_value(value), indent=indent, ensure_ascii=False)
    return text.translate(_JSON)
