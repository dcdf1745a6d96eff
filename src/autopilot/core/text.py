"""Text cut to the event log's limits (500 UTF-16 code units, surrogate-safe).

The seed system measures lengths in UTF-16 code units (JavaScript's ``length``), so
these helpers do too (``docs/formats.md``, "Line format").
"""

from __future__ import annotations

import re

from autopilot.core.redact import redact

MAX_EXCERPT_UTF16_UNITS = 500
"""``excerpt``, ``note``, ``reason``, ``argsSummary`` and ``desc`` are cut to this."""


def utf16_units(text: str) -> int:
    """Length of ``text`` in UTF-16 code units (astral characters count two)."""
    return len(text) + sum(1 for ch in text if ord(ch) > 0xFFFF)


def excerpt(text: str, limit_units: int = MAX_EXCERPT_UTF16_UNITS) -> str:
    """``text`` with well-known secrets redacted (``core.redact``), then cut to at most
    ``limit_units`` UTF-16 code units (``cut_units``): redacting first means a
    secret that straddles the cut never survives in part, where a redaction of the
    cut text would no longer recognise its shape.

    Args:
        text: Any string.
        limit_units: The cap, in UTF-16 code units (the log uses 500).

    Returns:
        A prefix of the redacted ``text`` (after surrogate repair) within the cap.
    """
    return cut_units(redact(text), limit_units)


def cut_units(text: str, limit_units: int = MAX_EXCERPT_UTF16_UNITS) -> str:
    """Cut ``text`` to at most ``limit_units`` UTF-16 code units (text already redacted).

    Never splits a surrogate pair: an astral character that would straddle the limit
    is left out whole. Lone surrogates (from bad input) are replaced with U+FFFD so
    the result always encodes as UTF-8.

    Args:
        text: Any string.
        limit_units: The cap, in UTF-16 code units (the log uses 500).

    Returns:
        A prefix of ``text`` (after surrogate repair) within the cap.
    """
    if len(text) <= limit_units // 2 and not _has_surrogates(text):
        return text
    # Every character is at least one unit, so the answer lies in this prefix.
    text = repair_surrogates(text[:limit_units])
    units = 0
    for index, ch in enumerate(text):
        units += 2 if ord(ch) > 0xFFFF else 1
        if units > limit_units:
            return text[:index]
    return text


def _has_surrogates(text: str) -> bool:
    return _SURROGATE_RE.search(text) is not None


def repair_surrogates(text: str) -> str:
    # Each surrogate code point becomes one U+FFFD (same UTF-16 length, same index),
    # so the result stays aligned with the input and encodes as UTF-8.
    if not _has_surrogates(text):
        return text
    return _SURROGATE_RE.sub("\ufffd", text)


_SURROGATE_RE = re.compile("[\ud800-\udfff]")
