"""Plain output: one line per event, ``time type key=value …``, easy to grep.

Used by ``run --plain``, by ``run`` when stdout is not a terminal, and by ``replay``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import Any

_SKIP_KEYS = frozenset({"type", "ts", "runId"})
_MAX_VALUE_CHARS = 160


def _value(value: Any) -> str:
    if isinstance(value, str):
        flat = " ".join(value.split())
        text = flat if len(flat) <= _MAX_VALUE_CHARS else flat[: _MAX_VALUE_CHARS - 1] + "…"
        return json.dumps(text, ensure_ascii=False) if (" " in text or not text) else text
    if isinstance(value, Mapping) and set(value) == {"input", "output"}:
        return f"{value['input']}/{value['output']}"
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, list | dict):
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
        return text if len(text) <= _MAX_VALUE_CHARS else text[: _MAX_VALUE_CHARS - 1] + "…"
    return str(value)


def format_time(ts_ms: Any) -> str:
    """``HH:MM:SS.mmm`` in local time, or ``??:??:??.???`` without a timestamp."""
    if not isinstance(ts_ms, int | float) or isinstance(ts_ms, bool):
        return "??:??:??.???"
    seconds = ts_ms / 1000
    return time.strftime("%H:%M:%S", time.localtime(seconds)) + f".{int(ts_ms) % 1000:03d}"


def format_event(event: Mapping[str, Any]) -> str:
    """One event as ``HH:MM:SS.mmm type key=value …`` (None values left out)."""
    parts = [format_time(event.get("ts")), str(event.get("type"))]
    for key, value in event.items():
        if key in _SKIP_KEYS or value is None:
            continue
        parts.append(f"{key}={_value(value)}")
    return " ".join(parts)
