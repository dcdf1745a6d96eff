"""Plain output: one line per event, ``time type key=value …``, easy to grep.

Used by ``run --plain``, by ``run`` when stdout is not a terminal, and by ``replay``.
Formatting never raises: an event read from a damaged log (a timestamp out of range,
a lone surrogate, a value JSON cannot show) still becomes one printable line.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Mapping
from typing import Any

_SKIP_KEYS = frozenset({"type", "ts", "runId"})
_MAX_VALUE_CHARS = 160
_NO_TIME = "??:??:??.???"
_SURROGATE_RE = re.compile("[\ud800-\udfff]")


def _cut(text: str) -> str:
    return text if len(text) <= _MAX_VALUE_CHARS else text[: _MAX_VALUE_CHARS - 1] + "…"


def _value(value: Any) -> str:
    if isinstance(value, str):
        text = _cut(" ".join(value.split()))
        return json.dumps(text, ensure_ascii=False) if (" " in text or not text) else text
    if isinstance(value, Mapping) and set(value) == {"input", "output"}:
        return f"{_value(value['input'])}/{_value(value['output'])}"
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, list | dict):
        return _cut(json.dumps(value, ensure_ascii=False, separators=(",", ":")))
    return _cut(str(value))


def _safe_value(value: Any) -> str:
    try:
        return _value(value)
    except (ValueError, TypeError, RecursionError):
        # An int past str()'s 4300 digits, a key JSON cannot hold, a deep nest.
        return f"<{type(value).__name__}>"


def format_time(ts_ms: Any) -> str:
    """``HH:MM:SS.mmm`` in local time, or ``??:??:??.???`` without a usable timestamp."""
    if not isinstance(ts_ms, int | float) or isinstance(ts_ms, bool):
        return _NO_TIME
    try:
        clock = time.strftime("%H:%M:%S", time.localtime(ts_ms / 1000))
        return clock + f".{int(ts_ms) % 1000:03d}"
    except (OverflowError, ValueError, OSError):
        return _NO_TIME  # out of the platform's time_t range, or NaN


def format_event(event: Mapping[str, Any]) -> str:
    """One event as ``HH:MM:SS.mmm type key=value …`` (None values left out).

    Never raises; lone surrogates (which cannot be printed as UTF-8) become U+FFFD
    and newlines inside values are flattened, so the result is one printable line.
    """
    parts = [format_time(event.get("ts")), _safe_value(event.get("type"))]
    for key, value in event.items():
        if key in _SKIP_KEYS or value is None:
            continue
        parts.append(f"{'_'.join(str(key).split())}={_safe_value(value)}")
    return _SURROGATE_RE.sub("\ufffd", " ".join(parts))
