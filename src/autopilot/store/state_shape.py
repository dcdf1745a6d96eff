"""The JSON types of the ``state.json`` fields autopilot reads (``docs/formats.md``).

A file that is JSON but not of this shape is as corrupt as a torn one: every number
is finite and from 0 to 10^15, every flag a boolean, every text a string.
"""

from __future__ import annotations

import math
from pathlib import Path

from autopilot.errors import StateFileError

TYPE_CHECKING = False  # as typing's, without importing typing at run time
if TYPE_CHECKING:
    from typing import Any

_TEXT = "a string"
_FLAG = "true or false"
_COUNT = "a whole number from 0 to 10^15"
_NUMBER = "a number from 0 to 10^15"
_OBJECT = "an object"
_TEXTS = "a list of strings"
_NUMBERS = "a list of numbers from 0 to 10^15"
_MAX_NUMBER = 10**15
"""Bound of every number in the file: epoch ms, durations, pids, tokens, USD."""

SHAPE: dict[str, str | dict[str, Any]] = {
    "runId": _TEXT,
    "label": _TEXT,
    "mode": _TEXT,
    "contextMode": _TEXT,
    "agent": _TEXT,
    "model": _TEXT,
    "cwd": _TEXT,
    "startedAt": _NUMBER,
    "max": _COUNT,
    "min": _COUNT,
    "iter": _COUNT,
    "iterationOpen": _FLAG,
    "status": _TEXT,
    "paused": _FLAG,
    "pausedAt": _NUMBER,
    "totalPausedMs": _NUMBER,
    "stopRequested": _FLAG,
    "stopNow": _FLAG,
    "stopReason": _TEXT,
    "sessionId": _TEXT,
    "pid": _COUNT,
    "pidStartTime": _NUMBER,
    "pidCommand": _TEXT,
    "host": _TEXT,
    "agentPid": _COUNT,
    "agentStartTime": _NUMBER,
    "attemptDir": _TEXT,
    "supervisorPid": _COUNT,
    "supervisorStartTime": _NUMBER,
    "supervisorRestarts": _NUMBERS,
    "agentEnv": _TEXTS,
    "envMissing": _TEXTS,
    "spend": {
        "costUsd": _NUMBER,
        "tokens": {"input": _COUNT, "output": _COUNT},
        "activeMs": _NUMBER,
        "waitingMs": _NUMBER,
        "iterations": _COUNT,
    },
    "loop": {
        "stagnationStreak": _COUNT,
        "lastResponseDigest": _TEXT,
        "failureStreak": _COUNT,
        "lastFailureSignature": _TEXT,
        "rateLimitWaits": _COUNT,
        "lastDenial": _TEXT,
    },
    "waitingUntil": _NUMBER,
    "terminated": _FLAG,
    "terminationReason": _TEXT,
    "terminationNote": _TEXT,
    "ending": _TEXT,
    "prompt": {"text": _TEXT, "path": _TEXT},
    "extraArgs": _TEXTS,
    "command": _TEXTS,
    "usageBaseline": {"sessionId": _TEXT, "input": _COUNT, "output": _COUNT},
    "gate": _TEXT,
    "gateAnswer": _TEXT,
    "hold": _TEXT,
    "version": _COUNT,
}
"""The fields autopilot reads and their JSON types (``config`` is ``RunConfig``'s;
``delivery`` is ``core.delivery.DeliveryLedger``'s, a malformed part of it counting as
empty)."""


def _fits(value: Any, kind: str) -> bool:
    if kind == _TEXT:
        return isinstance(value, str)
    if kind == _FLAG:
        return isinstance(value, bool)
    if kind == _TEXTS:
        return isinstance(value, list) and all(isinstance(item, str) for item in value)
    if kind == _NUMBERS:
        return isinstance(value, list) and all(_fits(item, _NUMBER) for item in value)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    if kind == _COUNT and not isinstance(value, int):
        return False
    if isinstance(value, int):  # a whole number of any size: no float conversion
        return 0 <= value <= _MAX_NUMBER
    return math.isfinite(value) and 0 <= value <= _MAX_NUMBER


def check_fields(
    data: dict[str, Any], shape: dict[str, str | dict[str, Any]], prefix: str, path: Path | str
) -> None:
    """Check each field of ``shape`` that ``data`` holds (missing or null is fine).

    Raises:
        StateFileError: the first field of the wrong type, as one line, e.g.
            ``<path>: field 'spend' must be an object (corrupt state file)``.
    """
    for name, kind in shape.items():
        value = data.get(name)
        if value is None:
            continue  # missing and null are the same: the default applies
        if isinstance(kind, dict):
            if not isinstance(value, dict):
                raise StateFileError(
                    f"{path}: field '{prefix}{name}' must be {_OBJECT} (corrupt state file)"
                )
            check_fields(value, kind, f"{prefix}{name}.", path)
        elif not _fits(value, kind):
            raise StateFileError(
                f"{path}: field '{prefix}{name}' must be {kind} (corrupt state file)"
            )
