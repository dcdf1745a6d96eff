"""Plain output: one line per event, ``time type key=value …``, easy to grep.

Used by ``run --plain``, by ``run`` when stdout is not a terminal, by ``watch
--plain`` and by ``replay``. Formatting never raises: an event read from a damaged
log (a timestamp out of range, a lone surrogate, a value JSON cannot show) still
becomes one printable line, with secrets redacted and terminal controls escaped
(``view.safe``). Moments (``waitingUntil``, ``startedAt``: epoch ms) are shown in
local time.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Mapping

from autopilot.core.redact import redact, redact_value
from autopilot.view.safe import escape_controls

TYPE_CHECKING = False  # as typing's, without importing typing at run time
if TYPE_CHECKING:
    from typing import Any

# change: decision_applied's record; launch: armed's (store.launch_record)
_SKIP_KEYS = frozenset({"type", "ts", "runId", "change", "launch"})
_MAX_VALUE_CHARS = 160
_NO_TIME = "??:??:??.???"
_SURROGATE_RE = re.compile("[\ud800-\udfff]")


def fmt_duration(ms: float | None) -> str:
    """``1h02m03s``, ``2m03s`` or ``45s``; ``-`` for None."""
    if ms is None:
        return "-"
    total = max(0, int(ms // 1000))
    hours, rest = divmod(total, 3600)
    minutes, seconds = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m{seconds:02d}s"
    if minutes:
        return f"{minutes}m{seconds:02d}s"
    return f"{seconds}s"


def _cut(text: str) -> str:
    return text if len(text) <= _MAX_VALUE_CHARS else text[: _MAX_VALUE_CHARS - 1] + "…"


_EPOCH_MS_MIN = 10**12
"""Epoch milliseconds from September 2001 on: smaller numbers are not moments."""
_EPOCH_MS_MAX = 10**14


def _is_moment(key: str, value: Any) -> bool:
    """``waitingUntil``, ``startedAt`` and the like holding epoch milliseconds."""
    return (
        (key.endswith("At") or key.endswith("Until"))
        and isinstance(value, int | float)
        and not isinstance(value, bool)
        and _EPOCH_MS_MIN <= value < _EPOCH_MS_MAX
    )


def format_moment(ts_ms: float, *, day_of_ms: Any = None) -> str:
    """Epoch ms as local ``HH:MM:SS``, or ``YYYY-MM-DDTHH:MM:SS`` when it falls on
    another day than ``day_of_ms`` (an epoch ms; None: today is not assumed)."""
    try:
        moment = time.localtime(ts_ms / 1000)
        same_day = isinstance(day_of_ms, int | float) and not isinstance(day_of_ms, bool)
        if same_day and time.localtime(day_of_ms / 1000)[:3] == moment[:3]:
            return time.strftime("%H:%M:%S", moment)
        return time.strftime("%Y-%m-%dT%H:%M:%S", moment)
    except (OverflowError, ValueError, OSError):
        return str(ts_ms)


def _value(value: Any) -> str:
    if isinstance(value, str):
        text = _cut(" ".join(redact(value).split()))
        return json.dumps(text, ensure_ascii=False) if (" " in text or not text) else text
    if isinstance(value, Mapping) and set(value) == {"input", "output"}:
        return f"{_value(value['input'])}/{_value(value['output'])}"
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, list | dict):
        flat = json.dumps(redact_value(value), ensure_ascii=False, separators=(",", ":"))
        return _cut(flat)
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

    Never raises; lone surrogates (which cannot be printed as UTF-8) become U+FFFD,
    newlines inside values are flattened, secrets are redacted and terminal
    controls escaped, so the result is one line that is safe to print.
    """
    parts = [format_time(event.get("ts")), _safe_value(event.get("type"))]
    for key, value in event.items():
        if key in _SKIP_KEYS or value is None:
            continue
        name = "_".join(str(key).split())
        if _is_moment(name, value):
            shown = format_moment(value, day_of_ms=event.get("ts"))
        else:
            shown = _safe_value(value)
        parts.append(f"{name}={shown}")
    return escape_controls(_SURROGATE_RE.sub("\ufffd", " ".join(parts)))


def waiting_hint(event: Mapping[str, Any], run_id: str) -> str | None:
    """For a ``gate`` event that asks a person (not an ``answered`` or ``released`` one), the whole
    question and how to answer it, as one safe line; None for any other event.

    ``format_event`` cuts a value at 160 characters, and a run in the foreground
    waits at a gate until a person answers from another terminal, so the line says
    how (``autopilot answer RUN TEXT`` or ``autopilot approve RUN``).
    """
    question = event.get("question")
    if event.get("type") != "gate" or event.get("state") in ("answered", "released"):
        return None
    if not isinstance(question, str) or not question.strip():
        return None
    said = " ".join(redact(question).split())
    line = (
        f"autopilot: {run_id} waits for your answer: {said} — from another terminal: "
        f"autopilot answer {run_id} TEXT, or autopilot approve {run_id}"
    )
    return escape_controls(_SURROGATE_RE.sub("\ufffd", line))
