"""What a work item's text and surfaces may hold (pure): ``core.workitems`` refuses the
rest where an item enters (``tasks add``/``edit``/``import``, a hand-written line).

Text must be encodable as UTF-8: a lone surrogate (``\\ud800`` in a JSON line, or a
byte of an argument that is not UTF-8) cannot be written to ``tasks.jsonl`` nor handed
to an agent, so it is refused rather than rewritten as ``?``. A surface is a path or
glob relative to the project root (``src/``, ``src/...``, ``docs/*.md``;
``core.boundary`` matches them): not absolute, not under ``~``, and never ``..``.
"""

from __future__ import annotations

import re

_SEPARATORS = re.compile(r"[/\\]")
_DRIVE = re.compile(r"^[A-Za-z]:")


def text_problem(value: str) -> str | None:
    """Why ``value`` cannot be an item's text, or None: ``a lone surrogate (U+D800) at
    character 3``, or for a byte Python decoded with ``surrogateescape`` (U+DC80 to
    U+DCFF) ``a byte that is not UTF-8 (0xFF) at character 3``."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as error:
        code = ord(value[error.start])
        what = (
            f"a byte that is not UTF-8 (0x{code - 0xDC00:02X})"
            if 0xDC80 <= code <= 0xDCFF
            else f"a lone surrogate (U+{code:04X})"
        )
        return f"{what} at character {error.start + 1}, which is not text"
    return None


def surface_problem(value: str) -> str | None:
    """Why ``value`` cannot be an allowed surface, or None."""
    problem = text_problem(value)
    if problem is not None:
        return problem
    text = value.strip()
    if not text:
        return "an empty surface"
    if any(ord(char) < 32 for char in text):
        return f"{value!r} has a control character"
    relative = "; a surface is a path or glob relative to the project root"
    if text.startswith(("/", "\\", "~")) or _DRIVE.match(text):
        return f"{value!r} is not relative to the project{relative}"
    if ".." in _SEPARATORS.split(text):
        return f"{value!r} leaves the project (..){relative}"
    return None
