"""``state.json``: a run's only mutable file (SPEC §5, seed 000).

Every write takes an ``fcntl`` lock on ``state.json.lock`` (released by the OS when
its holder dies, so a crash never leaves a run locked), reads the current file,
applies a change, bumps ``version``, writes a temp file, fsyncs it and renames it
into place. Concurrent ``pause`` and ``stop`` from two terminals never lose an
update. Readers never take the lock: a rename is atomic, so they see the old file or
the new one, never a mix.

Fields (seed names where they exist): ``runId``, ``label``, ``mode``,
``contextMode``, ``agent``, ``model``, ``cwd``, ``startedAt`` (epoch ms), ``max``,
``min``, ``iter``, ``status``, ``paused``, ``pausedAt``, ``totalPausedMs``,
``stopRequested``, ``stopNow``, ``stopReason``, ``sessionId``, ``pid``,
``pidStartTime`` (epoch s), ``host``, ``spend`` (``costUsd``, ``tokens``
``{input, output}``, ``activeMs``, ``iterations``), ``waitingUntil``,
``terminated``, ``terminationReason``, ``terminationNote``, ``config`` (what the
run was armed with, so a restart applies the same limits) and ``version``; also
``iterationOpen``, ``agentPid``, ``agentStartTime``, ``supervisorPid``,
``supervisorStartTime`` and ``supervisorRestarts`` (epoch ms of the supervisor's
restarts within its window), ``delivery`` (``core.delivery.DeliveryLedger``),
``loop`` (the policy's streaks, see ``loop.counters``), ``prompt``
(``{text, path}``), ``extraArgs``, ``command`` and ``usageBaseline``
(``{sessionId, input, output}``).

``read_state`` checks the type of every field autopilot reads (``validate_state``):
a file that is JSON but not of this shape is as corrupt as a torn one, and readers
may rely on the types. A missing field or ``null`` is fine (readers use defaults).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import filelock

from autopilot.config import RunConfig
from autopilot.errors import StateFileError
from autopilot.redact import redact
from autopilot.store.private import PRIVATE_FILE_MODE, make_private_dir, open_private

LOCK_TIMEOUT_SECONDS = 30.0


class RunStatus:
    """The closed set of run statuses (seed 003), as their JSON values."""

    RUNNING = "running"
    PLANNING = "planning"
    WAITING = "waiting"
    RATE_LIMITED = "rate_limited"
    PAUSED = "paused"
    GATED = "gated"
    AWAITING_USER = "awaiting_user"
    IDLE = "idle"
    COMPLETED = "completed"
    STOPPED = "stopped"
    ERROR = "error"

    TERMINAL = frozenset({COMPLETED, STOPPED, ERROR})


_SURROGATE_RE = re.compile("[\ud800-\udfff]")
_SURROGATE_ESCAPE_RE = re.compile(rb"\\u[dD][89a-fA-F]")


def _repair_surrogates(text: str) -> str:
    """Each lone surrogate (it cannot be UTF-8) becomes U+FFFD."""
    return _SURROGATE_RE.sub("\ufffd", text)


_TEXT = "a string"
_FLAG = "true or false"
_COUNT = "a whole number from 0 to 10^15"
_NUMBER = "a number from 0 to 10^15"
_OBJECT = "an object"
_TEXTS = "a list of strings"
_NUMBERS = "a list of numbers from 0 to 10^15"
_MAX_NUMBER = 10**15
"""Bound of every number in the file: epoch ms, durations, pids, tokens, USD."""

_SHAPE: dict[str, str | dict[str, Any]] = {
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
    "host": _TEXT,
    "agentPid": _COUNT,
    "agentStartTime": _NUMBER,
    "supervisorPid": _COUNT,
    "supervisorStartTime": _NUMBER,
    "supervisorRestarts": _NUMBERS,
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
    },
    "waitingUntil": _NUMBER,
    "terminated": _FLAG,
    "terminationReason": _TEXT,
    "terminationNote": _TEXT,
    "prompt": {"text": _TEXT, "path": _TEXT},
    "extraArgs": _TEXTS,
    "command": _TEXTS,
    "usageBaseline": {"sessionId": _TEXT, "input": _COUNT, "output": _COUNT},
    "version": _COUNT,
}
"""The fields autopilot reads and their JSON types (``config`` is ``RunConfig``'s)."""


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
    return math.isfinite(value) and 0 <= value <= _MAX_NUMBER


def _check_fields(
    data: dict[str, Any], shape: dict[str, str | dict[str, Any]], prefix: str, path: Path | str
) -> None:
    for name, kind in shape.items():
        value = data.get(name)
        if value is None:
            continue  # missing and null are the same: readers fall back to defaults
        if isinstance(kind, dict):
            if not isinstance(value, dict):
                raise StateFileError(
                    f"{path}: field '{prefix}{name}' must be {_OBJECT} (corrupt state file)"
                )
            _check_fields(value, kind, f"{prefix}{name}.", path)
        elif not _fits(value, kind):
            raise StateFileError(
                f"{path}: field '{prefix}{name}' must be {kind} (corrupt state file)"
            )


def validate_state(state: Any, path: Path | str = "state.json") -> dict[str, Any]:
    """Check that a parsed ``state.json`` has the shape autopilot reads.

    Every field in the module docstring that is present and not ``null`` must have
    its JSON type (numbers finite, from 0 to 10^15), and ``config`` must be what
    ``RunConfig.from_json`` accepts. Unknown fields are left alone.

    Args:
        state: The parsed JSON.
        path: The file it came from, for the message.

    Returns:
        ``state`` itself, now known to be a dict of the right shape.

    Raises:
        StateFileError: the first field of the wrong type, as one line, e.g.
            ``<path>: field 'spend' must be an object (corrupt state file)``.
    """
    if not isinstance(state, dict):
        raise StateFileError(f"{path} does not hold a JSON object (corrupt state file)")
    _check_fields(state, _SHAPE, "", path)
    if state.get("config") is not None:
        RunConfig.from_json(state["config"], source=str(path))
    return state


def read_state(path: Path) -> dict[str, Any]:
    """Read a ``state.json`` without locking, and check its shape (``validate_state``).

    Lone surrogates in strings (``"\\ud83d"`` escapes) are replaced with U+FFFD, so
    whatever is read can be printed and written back.

    Raises:
        StateFileError: the file is missing, unreadable, not JSON, not an object, or
            a field autopilot reads has the wrong type.
    """
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise StateFileError(f"{path} does not exist") from None
    except OSError as error:
        raise StateFileError(f"cannot read {path}: {error.strerror or error}") from None
    try:
        value = json.loads(data)
        if _SURROGATE_ESCAPE_RE.search(data):
            value = json.loads(_repair_surrogates(json.dumps(value, ensure_ascii=False)))
    except (ValueError, RecursionError):
        raise StateFileError(f"{path} is not valid JSON (corrupt state file)") from None
    return validate_state(from_node_implementation(value), path)


NODE_AGENT = "copilot"
"""The agent of a run written by the Node implementation (it drives Copilot CLI)."""


def from_node_implementation(value: Any) -> Any:
    """A ``state.json`` written by the Node implementation of the tool family, in ours.

    It has ``iter`` and ``resetOn`` but no ``status``, ``config``, ``spend`` or
    ``agent``: the status
    is derived (``terminationReason`` ``complete`` means completed; ``error`` and
    ``subprocess_failed`` an error; else stopped, or paused/running while not
    terminated), the agent is ``copilot`` and ``iter`` iterations were spent. Any
    other value is returned as it is.
    """
    # Its writer always writes ``resetOn`` and ``iter``, and never ``status`` or ``config``.
    if not isinstance(value, dict) or not {"iter", "resetOn"} <= value.keys():
        return value
    if {"status", "config", "spend"} & value.keys():
        return value
    state = dict(value)
    reason = state.get("terminationReason")
    if state.get("terminated"):
        status = RunStatus.COMPLETED if reason == "complete" else RunStatus.STOPPED
        if reason in ("error", "subprocess_failed"):
            status = RunStatus.ERROR
    else:
        status = RunStatus.PAUSED if state.get("paused") else RunStatus.RUNNING
    state["status"] = status
    state.setdefault("agent", NODE_AGENT)
    iterations = state.get("iter")
    if isinstance(iterations, int) and not isinstance(iterations, bool):
        state["spend"] = {"iterations": iterations}
    run_id = state.get("runId")
    if isinstance(run_id, str) and "-" in run_id:
        state.setdefault("label", run_id.rsplit("-", 1)[0])
    return state


def read_state_quietly(path: Path) -> dict[str, Any] | None:
    """``read_state``, or None when it cannot be read."""
    try:
        return read_state(path)
    except StateFileError:
        return None


def write_atomically(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` (mode 0600) via a temp file, fsync and rename.

    Raises:
        OSError: the write failed; ``path`` is unchanged and the temp file removed.
    """
    tmp = path.with_name(f"{path.name}.tmp.{os.getpid()}.{threading.get_ident()}")
    try:
        with open(open_private(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    try:
        dir_fd = os.open(path.parent, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dir_fd)
    except OSError:
        pass
    finally:
        os.close(dir_fd)


_REDACTED_FIELDS = ("terminationNote", "terminationReason", "stopReason")
"""Fields that may quote an agent (its error text): written with secrets redacted."""


def encode_state(state: dict[str, Any]) -> bytes:
    """Two-space indented JSON with a trailing newline (the seed's layout).

    Lone surrogates in strings (e.g. a session id cut from an agent's output) are
    written as U+FFFD, so encoding never fails on them. The fields that may quote
    an agent (``terminationNote``, …) are written with well-known secrets redacted.

    Raises:
        ValueError: NaN or an infinity in a number, or a circular reference.
        TypeError: a value JSON cannot hold.
    """
    shown = {
        key: redact(value) if key in _REDACTED_FIELDS and isinstance(value, str) else value
        for key, value in state.items()
    }
    text = json.dumps(shown, indent=2, ensure_ascii=False, allow_nan=False)
    return (_repair_surrogates(text) + "\n").encode()


class StateStore:
    """Locked read-modify-write access to one run's ``state.json``.

    Args:
        path: The ``state.json`` path; its lock is ``state.json.lock`` beside it.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = filelock.UnixFileLock(
            str(path.with_name(path.name + ".lock")),
            timeout=LOCK_TIMEOUT_SECONDS,
            mode=PRIVATE_FILE_MODE,
        )

    def read(self) -> dict[str, Any]:
        """The current state, read without the lock.

        Raises:
            StateFileError: see ``read_state``.
        """
        return read_state(self.path)

    def create(self, state: dict[str, Any]) -> dict[str, Any]:
        """Write the first version of the file.

        Raises:
            StateFileError: the file already exists or cannot be written.
        """
        with self._locked():
            if self.path.exists():
                raise StateFileError(f"{self.path} already exists")
            state = dict(state, version=1)
            self._write(state)
            return state

    def update(
        self,
        change: Callable[[dict[str, Any]], None],
        *,
        fallback: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Apply ``change`` to the state under the lock and write it back.

        Args:
            change: Mutates the state dict in place.
            fallback: Used instead of the file when it is corrupt or missing; the
                corrupt file is kept beside it as ``state.json.corrupt-<version>`` so
                nothing is lost, and a run folder that was deleted is made again
                (0700). Without a fallback a corrupt file raises.

        Returns:
            The state as written (with its new ``version``).

        Raises:
            StateFileError: the file is corrupt (and no fallback) or cannot be
                written, or the lock could not be had in 30 seconds.
        """
        if fallback is not None and not self.path.parent.exists():
            try:
                make_private_dir(self.path.parent, exist_ok=True)
            except OSError as error:
                raise StateFileError(
                    f"cannot make {self.path.parent} again: {error.strerror or error}"
                ) from None
        with self._locked():
            try:
                state = read_state(self.path)
            except StateFileError:
                if fallback is None:
                    raise
                self._keep_corrupt_copy(fallback)
                state = dict(fallback)
            change(state)
            previous = state.get("version")
            state["version"] = (previous if isinstance(previous, int) else 0) + 1
            self._write(state)
            return state

    def _keep_corrupt_copy(self, fallback: dict[str, Any]) -> None:
        aside = self.path.with_name(f"{self.path.name}.corrupt-{fallback.get('version', 0)}")
        try:
            if self.path.exists():
                os.replace(self.path, aside)
        except OSError:
            pass

    def _write(self, state: dict[str, Any]) -> None:
        try:
            write_atomically(self.path, encode_state(state))
        except (OSError, ValueError) as error:
            detail = error.strerror if isinstance(error, OSError) else str(error)
            raise StateFileError(f"cannot write {self.path}: {detail or error}") from None

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        try:
            self._lock.acquire()
        except filelock.Timeout:
            raise StateFileError(
                f"{self.path} stayed locked for {LOCK_TIMEOUT_SECONDS:.0f} s"
            ) from None
        except OSError as error:
            raise StateFileError(f"cannot lock {self.path}: {error.strerror or error}") from None
        try:
            yield
        finally:
            self._lock.release()
