"""When a rate or usage limit resets, in every form the agent CLIs print.

Pure functions shared by every adapter; none of them reads the clock (``now`` is an
argument: an aware ``datetime`` whose zone is used for clock times without one).

* ``parse_reset_time`` reads an agent's error text. Forms seen in the CLIs' real output
  (``tests/data/captured-streams/`` and users' runs): epoch seconds or milliseconds
  (``"resets_at":1777936568``, Claude's ``usage limit reached|1750000000``),
  ``"resets_in_seconds":13872``, ``retry-after: 30``, Google's ``"retryDelay":"23s"``,
  ``try again in 2 days 17 hours 14 minutes``, ``Please retry in 23.5s``, and clock
  times ``resets 7pm``, ``resets 10:20pm (America/Edmonton)``, ``resets Oct 6, 1pm
  (Europe/Berlin)``, ``try again at 8:53 AM`` (12- or 24-hour, an optional IANA zone,
  rolled over to the next day once the time has passed today).
* ``reset_from_fields`` does the same for structured fields (JSON error bodies, HTTP
  headers, Claude's ``rate_limit_event``), including ``retry-after`` as an HTTP date.
* ``epoch_to_ms`` and ``moment_of`` read epoch numbers and line timestamps.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta, tzinfo
from typing import Any

_I = re.IGNORECASE


def epoch_to_ms(value: object) -> int | None:
    """An epoch timestamp in seconds or milliseconds, as epoch milliseconds.

    Seconds are told from milliseconds by size: 1e9-1e11 are seconds (2001-5138),
    1e12-1e14 are milliseconds; anything else (0, negative, a bool) is None.
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            return None
    if not isinstance(value, int | float):
        return None
    number = float(value)
    if 1e9 <= number < 1e11:
        return int(number * 1000)
    if 1e12 <= number < 1e14:
        return int(number)
    return None


LATEST_RESET_MS = 10**14
"""Epoch ms past which a reset time is not one (the year 5138, ``epoch_to_ms``'s bound):
an absurd or infinite delay in an agent's output gives no reset time."""


def _ms(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


def _later(now_ms: int, seconds: float) -> int | None:
    """``seconds`` after ``now_ms`` (epoch ms); None for a negative, infinite, NaN or
    absurd delay (a reset after ``LATEST_RESET_MS``)."""
    if not (math.isfinite(seconds) and seconds >= 0) or seconds * 1000 >= LATEST_RESET_MS:
        return None
    moment = now_ms + int(seconds * 1000)
    return moment if moment < LATEST_RESET_MS else None


def _aware(now: datetime) -> datetime:
    return now if now.tzinfo is not None else now.replace(tzinfo=UTC)


def parse_retry_after(value: str, now: datetime) -> int | None:
    """An HTTP ``Retry-After`` value (delay seconds or an HTTP date) as epoch ms."""
    text = value.strip()
    try:
        seconds = float(text)
    except ValueError:
        from email.utils import parsedate_to_datetime  # 3 MiB: only for an HTTP date

        try:
            moment = parsedate_to_datetime(text)
        except (TypeError, ValueError, IndexError):
            return None
        absolute = _ms(_aware(moment))
        return absolute if 0 < absolute < LATEST_RESET_MS else None
    return _later(_ms(_aware(now)), seconds)


_EPOCH_KEYS = frozenset({"resets_at", "resetsat", "reset_at", "resetat", "resettime"})
_SECONDS_KEYS = frozenset(
    {"resets_in_seconds", "reset_in_seconds", "retry_after_seconds", "retry_after", "retryafter"}
)
_DELAY = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*s\s*$")


def reset_from_fields(fields: Mapping[str, Any], now: datetime, _depth: int = 0) -> int | None:
    """When a limit resets, from structured fields (epoch ms), searching nested values.

    Recognised keys (case-insensitive): ``resets_at``/``resetsAt``/``reset_at``
    (epoch s or ms), ``resets_in_seconds``/``retry_after``/``retryAfter`` (seconds
    from ``now``), ``retry-after`` (seconds or an HTTP date), ``retry-after-ms``,
    ``retryDelay`` (Google's ``"23s"``). A string value that holds a JSON object (an
    error body inside an error event) is searched too. Absolute times win.

    Args:
        fields: A decoded JSON object or a header mapping.
        now: When the fields were received.

    Returns:
        Epoch milliseconds, or None.
    """
    if _depth > 5:
        return None
    relative: int | None = None
    nested: list[Any] = []
    now_ms = _ms(_aware(now))
    for key, value in fields.items():
        name = str(key).lower()
        if name in _EPOCH_KEYS:
            absolute = epoch_to_ms(value)
            if absolute is not None:
                return absolute
        elif name == "retry-after" and isinstance(value, str | int | float):
            relative = relative or parse_retry_after(str(value), now)
        elif name == "retry-after-ms" and isinstance(value, str | int | float):
            delay = _number(value)
            relative = relative or (_later(now_ms, delay / 1000) if delay is not None else None)
        elif name in _SECONDS_KEYS:
            delay = _number(value)
            relative = relative or (_later(now_ms, delay) if delay is not None else None)
        elif name == "retrydelay" and isinstance(value, str):
            delay_match = _DELAY.match(value)
            if delay_match:
                relative = relative or _later(now_ms, float(delay_match.group(1)))
        elif isinstance(value, Mapping | list) or (
            isinstance(value, str) and value.lstrip().startswith("{") and len(value) < 65_536
        ):
            nested.append(value)
    for value in nested:
        found = _reset_in(value, now, _depth + 1)
        if found is not None:
            return found
    return relative


def _reset_in(value: Any, now: datetime, depth: int) -> int | None:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except (ValueError, RecursionError):
            return None
    if isinstance(value, Mapping):
        return reset_from_fields(value, now, depth)
    if isinstance(value, list):
        for item in value[:20]:
            found = _reset_in(item, now, depth + 1)
            if found is not None:
                return found
    return None


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value) if value >= 0 else None
    if isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            return None
        return number if number >= 0 else None
    return None


_EPOCH_TEXT = re.compile(
    r"[\"']?\b(?:resets?_?at|resetsAt|resetAt)[\"']?\s*[:=]\s*[\"']?(\d{9,14}(?:\.\d+)?)\b", _I
)
_LEGACY_CLAUDE = re.compile(r"\busage limit reached\|(\d{10,13})\b", _I)
_SECONDS_TEXT = re.compile(
    r"[\"']?\b(?:resets?_in_seconds|retry_after_seconds|retry[_-]after|retryAfter)[\"']?"
    r"\s*[:=]\s*[\"']?(\d+(?:\.\d+)?)\b",
    _I,
)
_DELAY_TEXT = re.compile(r"[\"']?\bretryDelay[\"']?\s*[:=]\s*[\"'](\d+(?:\.\d+)?)s[\"']", _I)
_UNITS = {
    "d": 86_400,
    "day": 86_400,
    "days": 86_400,
    "h": 3_600,
    "hr": 3_600,
    "hrs": 3_600,
    "hour": 3_600,
    "hours": 3_600,
    "m": 60,
    "min": 60,
    "mins": 60,
    "minute": 60,
    "minutes": 60,
    "s": 1,
    "sec": 1,
    "secs": 1,
    "second": 1,
    "seconds": 1,
}
_RELATIVE = re.compile(
    r"\b(?:try(?:ing)? again|retry(?:ing)?|resets?|available(?: again)?)\s+(?:in|after)\s+", _I
)
_DURATION_PART = re.compile(
    r"\s*(?:,\s*|and\s+)?(\d+(?:\.\d+)?)\s*"
    r"(days?|d|hours?|hrs?|h|minutes?|mins?|m|seconds?|secs?|s)\b",
    _I,
)
_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_CLOCK = re.compile(
    r"\b(?:resets?|try again|available again|retry)\s+(?:at\s+|on\s+)?"
    r"(?:(?P<month>jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?\s+"
    r"(?P<day>\d{1,2})(?:st|nd|rd|th)?,?\s+(?:at\s+)?)?"
    r"(?P<hour>\d{1,2})(?::(?P<minute>\d{2}))?\s*(?P<ampm>[ap]\.?\s?m\b\.?)?"
    r"(?:\s*\((?P<zone>[A-Za-z][\w+\-/]{0,63})\))?",
    _I,
)


def parse_reset_time(text: str, now: datetime) -> int | None:
    """When a limit resets, from an agent's error text (epoch ms).

    Forms, most precise first: an embedded epoch field or Claude's legacy
    ``…|<epoch>``; a delay field (``resets_in_seconds``, ``retry-after``,
    ``retryDelay``); ``try again in 2 days 17 hours 14 minutes`` / ``retry in
    23.5s``; a clock time ``resets 7pm``, ``resets 10:20pm (America/Edmonton)``,
    ``resets Oct 6, 1pm (Europe/Berlin)``, ``try again at 8:53 AM``.

    A clock time without a date that has already passed today (in its zone, or in
    ``now``'s zone when none is named) means tomorrow. An epoch already in the past is
    returned as it is: the loop then falls back to its minimum backoff.

    Args:
        text: The agent's own error text.
        now: When the text was printed (aware; naive means UTC).

    Returns:
        Epoch milliseconds, or None when the text gives no reset time.
    """
    now = _aware(now)
    now_ms = _ms(now)
    for pattern in (_EPOCH_TEXT, _LEGACY_CLAUDE):
        match = pattern.search(text)
        if match and (absolute := epoch_to_ms(match.group(1))) is not None:
            return absolute
    match = _SECONDS_TEXT.search(text) or _DELAY_TEXT.search(text)
    if match:
        return _later(now_ms, float(match.group(1)))
    for match in _RELATIVE.finditer(text):
        seconds = _duration_seconds(text, match.end())
        if seconds is not None:
            return _later(now_ms, seconds)
    for match in _CLOCK.finditer(text):
        moment = _clock_time(match, now)
        if moment is not None:
            return _ms(moment)
    return None


def _duration_seconds(text: str, start: int) -> float | None:
    total = 0.0
    found = False
    position = start
    while True:
        match = _DURATION_PART.match(text, position)
        if match is None:
            break
        total += float(match.group(1)) * _UNITS[match.group(2).lower()]
        found = True
        position = match.end()
    return total if found else None


def _clock_time(match: re.Match[str], now: datetime) -> datetime | None:
    ampm = (match.group("ampm") or "").replace(".", "").replace(" ", "").lower()
    minute_text = match.group("minute")
    if not ampm and minute_text is None:
        return None  # "resets 5" alone is not a time
    hour = int(match.group("hour"))
    minute = int(minute_text or 0)
    if ampm:
        if not 1 <= hour <= 12:
            return None
        hour = hour % 12 + (12 if ampm == "pm" else 0)
    if hour > 23 or minute > 59:
        return None
    zone = _zone(match.group("zone")) or now.tzinfo
    local = now.astimezone(zone)
    month = match.group("month")
    if month:
        day = int(match.group("day"))
        try:
            moment = local.replace(
                month=_MONTHS.index(month[:3].lower()) + 1,
                day=day,
                hour=hour,
                minute=minute,
                second=0,
                microsecond=0,
            )
        except ValueError:
            return None
        if moment < local - timedelta(days=1):
            try:
                moment = moment.replace(year=moment.year + 1)
            except ValueError:
                return None
        return moment
    moment = local.replace(hour=hour, minute=minute, second=0, microsecond=0)
    if moment <= local:
        moment += timedelta(days=1)
    return moment


def _zone(name: str | None) -> tzinfo | None:
    if not name or ("/" not in name and name.upper() not in ("UTC", "GMT")):
        return None
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError  # only for a named zone

    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return None


def moment_of(value: object, zone: tzinfo | None) -> datetime | None:
    """A line's own timestamp as an aware time in ``zone``.

    CLIs that stamp their lines (Copilot and Gemini with ISO 8601, opencode and pi
    with epoch ms) say when an error happened; relative reset times count from then.

    Args:
        value: The timestamp field: epoch seconds or ms, or an ISO 8601 string.
        zone: The zone to express it in (the wall clock's), or None for UTC.

    Returns:
        The moment, or None when ``value`` is not a timestamp.
    """
    moment: datetime | None = None
    if isinstance(value, str) and not value.strip().isdigit():
        try:
            moment = _aware(datetime.fromisoformat(value.strip().replace("Z", "+00:00")))
        except ValueError:
            return None
    else:
        ms = epoch_to_ms(value)
        moment = datetime.fromtimestamp(ms / 1000, UTC) if ms is not None else None
    return moment.astimezone(zone) if moment is not None and zone is not None else moment
