"""The event log's line format (``events.jsonl``): one line written, one line read.

One JSON object per line, each with ``type``, ``ts`` (epoch milliseconds, an integer)
and ``runId``. The vocabulary starts with the Node tool's names and only ever grows:
``EVENT_TYPES`` is appended to, never reordered. Lines follow the seed system's
writer contract (``docs/formats.md``, "Line format"): compact JSON,
``ensure_ascii=False``, no NaN/Infinity, at most 16 KiB per line, excerpts and notes
cut at 500 UTF-16 code units without splitting a surrogate pair. ``serialize_event``
makes a line, ``parse_event_line`` accepts one by the seed reader's rules; the writer
is ``store.events.EventLog``, the readers ``store.event_stream`` and ``store.reader``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping

from autopilot.core.event_words import EventType
from autopilot.core.redact import redact_value
from autopilot.core.text import cut_units, repair_surrogates
from autopilot.store.lines import READ_LINE_CAP

TYPE_CHECKING = False  # as typing's, without importing typing at run time
if TYPE_CHECKING:
    from typing import Any, TypeGuard

MAX_EVENT_LINE_BYTES = 16 * 1024
"""A serialized event line (without its newline) may be at most this long."""


MAX_READ_LINE_BYTES = READ_LINE_CAP
"""Readers skip longer lines: 64 times what a writer may write, so something else
appending to a log (or a corrupt file) cannot make a reader hold gigabytes
(``store.lines.READ_LINE_CAP``, which the index's reader takes without this module)."""


EVENT_TYPES: tuple[str, ...] = tuple(t.value for t in EventType)
"""The closed vocabulary, in its append-only order."""

SEED_EVENT_TYPES: frozenset[str] = frozenset(EVENT_TYPES[:25])
"""The types the seed system's reader accepts; it skips the rest."""

TERMINAL_EVENT_TYPES = frozenset({EventType.COMPLETE.value, EventType.ABORT.value})

_CAPPED_FIELDS = ("excerpt", "note", "reason", "argsSummary", "desc")
_UNREDACTED_FIELDS = frozenset({"type", "ts", "runId"})


JS_NUMBER_LIMIT = 2**1024
"""A JSON number this large or larger is Infinity to JavaScript's ``JSON.parse``."""


def finite_number(value: Any) -> TypeGuard[int | float]:
    """True for a number (not a bool) that the Node tool's reader reads as finite.

    ``json`` reads a 400-digit integer as a Python int; JavaScript reads it as
    Infinity, so it is not finite here either.
    """
    kind = type(value)
    if kind is int:  # the common case first: this runs for every field of every event
        whole: int = value
        return -JS_NUMBER_LIMIT < whole < JS_NUMBER_LIMIT
    if kind is float:
        real: float = value
        return real - real == 0.0  # False for NaN and the infinities
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, bool) or not isinstance(value, int):
        return False
    return -JS_NUMBER_LIMIT < value < JS_NUMBER_LIMIT


def serialize_event(event: Mapping[str, Any]) -> bytes | None:
    """Serialize one event to a line (without newline), or None if it cannot fit.

    Every string is written with well-known secrets redacted (``redact``), then the
    capped text fields are cut to 500 UTF-16 units. If the line is still over
    ``MAX_EVENT_LINE_BYTES``, ``excerpt`` and ``note`` are dropped (as the seed's
    lenient emitter does); if it still does not fit, the event is refused.

    Raises:
        ValueError: the event has no ``type``/``ts``/``runId``, or holds NaN/Infinity
            or a value JSON cannot represent.
    """
    ts = event.get("ts")
    if not isinstance(event.get("type"), str) or not isinstance(ts, int) or isinstance(ts, bool):
        raise ValueError("an event needs a str 'type' and an int 'ts'")
    if not isinstance(event.get("runId"), str) or not event["runId"]:
        raise ValueError("an event needs a non-empty 'runId'")
    record = redact_value(dict(event), skip=_UNREDACTED_FIELDS.__contains__)
    for key in _CAPPED_FIELDS:
        value = record.get(key)
        if isinstance(value, str):
            record[key] = cut_units(value)  # already redacted, above
    line = _dumps(record)
    if len(line) > MAX_EVENT_LINE_BYTES:
        for key in ("excerpt", "note"):
            record.pop(key, None)
        line = _dumps(record)
        if len(line) > MAX_EVENT_LINE_BYTES:
            return None
    return line


def _dumps(record: Mapping[str, Any]) -> bytes:
    try:
        text = json.dumps(record, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, RecursionError) as error:
        raise ValueError(f"not JSON-serializable: {error}") from None
    return repair_surrogates(text).encode("utf-8")


def parse_event_line(line: bytes | str) -> dict[str, Any] | None:
    """Parse one log line as the seed reader does, or return None to skip it.

    Accepted only if it is strict JSON (no NaN/Infinity) holding an object whose
    ``type`` is a known event type, ``ts`` is a finite number and ``runId`` a
    non-empty string. Surrounding whitespace (and CRLF) is tolerated. Unknown types
    are skipped, like the seed's.
    """
    text = line.strip()
    if not text:
        return None
    try:
        value = _DECODER.decode(text if isinstance(text, str) else text.decode("utf-8"))
    except (ValueError, RecursionError):
        return None
    if not isinstance(value, dict):
        return None
    if not finite_number(value.get("ts")):
        return None
    run_id = value.get("runId")
    if not isinstance(run_id, str) or not run_id:
        return None
    if value.get("type") not in _EVENT_TYPE_SET:
        return None
    return value


_EVENT_TYPE_SET = frozenset(EVENT_TYPES)


def _reject_constant(name: str) -> Any:
    # NaN/Infinity are not JSON: the seed reader's JSON.parse rejects the whole line.
    raise ValueError(f"{name} is not valid JSON")


_DECODER = json.JSONDecoder(parse_constant=_reject_constant)
