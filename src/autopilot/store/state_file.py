"""``state.json`` as plain JSON: read, checked, viewed and changed in place under its
lock, without the typed ``RunState`` (``store.run_state``, a tree of msgspec Structs).

The control commands (``pause``, ``resume``, ``stop``, ``send``, ``status``'s choice of
run) read and write through here so that they start in about the time Python takes:
``check_state_json`` refuses exactly what ``decode_state`` refuses, ``StateView``
reads each field as ``decode_state`` does, and ``update_state_json`` writes under the
lock ``StateStore`` takes, atomically and fsynced, with ``version`` bumped. A file
``RunState.to_json`` wrote comes out of a light change byte for byte as the typed
change would write it (``tests/store/test_state_file.py``).
"""

from __future__ import annotations

import errno
import json
import os
import re
import stat
from collections.abc import Callable
from pathlib import Path

from autopilot.core.redact import redact
from autopilot.core.run_words import NODE_COMPLETE_REASON, NODE_FAILED_REASONS, RunStatus
from autopilot.errors import StateFileError
from autopilot.store.atomic import write_atomically
from autopilot.store.flock import holding
from autopilot.store.state_shape import SHAPE, check_fields

TYPE_CHECKING = False  # as typing's, without importing typing at run time
if TYPE_CHECKING:
    from typing import Any

LOCK_TIMEOUT_SECONDS = 30.0
"""How long a writer waits for ``state.json.lock``."""

KNOWN_FIELDS = frozenset(SHAPE) | {"config", "delivery"}
"""The fields ``RunState`` models; the others are its ``extra``."""

MAX_STATE_DEPTH = 64
"""How deeply a ``state.json`` may nest objects and arrays (the file ``RunState``
writes nests about five deep). Deeper is a corrupt state: the readers copy and redact
what they read recursively, and would fail on a forged file nested hundreds deep."""

_SURROGATE_RE = re.compile("[\ud800-\udfff]")
_SURROGATE_ESCAPE_RE = re.compile(rb"\\u[dD][89a-fA-F]")


def repair_surrogates(text: str) -> str:
    """Each lone surrogate (it cannot be UTF-8) becomes U+FFFD."""
    return _SURROGATE_RE.sub("\ufffd", text)


def read_state_json(path: Path) -> dict[str, Any]:
    """Read a ``state.json`` as JSON, without locking and without checking its shape.

    Lone surrogates in strings (``"\\ud83d"`` escapes) are replaced with U+FFFD, so
    whatever is read can be printed and written back.

    Raises:
        StateFileError: the file is missing, unreadable, not JSON or not an object.
    """
    return parse_state_json(read_state_bytes(path), path)


def read_state_bytes(path: Path) -> bytes:
    """The bytes of a ``state.json``.

    Raises:
        StateFileError: the file is missing or unreadable.
    """
    try:
        # Not blocking on open: a FIFO put there would hold every reader forever.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        raise StateFileError(f"{path} does not exist") from None
    except OSError as error:
        raise StateFileError(
            f"cannot read {path}: {error.strerror or error}", errno=error.errno
        ) from None
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise StateFileError(
                f"cannot read {path}: {os.strerror(errno.EISDIR)}", errno=errno.EISDIR
            )
        if not stat.S_ISREG(mode):
            raise StateFileError(f"{path} is not a regular file (corrupt state file)")
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks)
    except OSError as error:
        raise StateFileError(
            f"cannot read {path}: {error.strerror or error}", errno=error.errno
        ) from None
    finally:
        os.close(fd)


def parse_state_json(data: bytes, path: Path) -> dict[str, Any]:
    """``data`` (a ``state.json``'s bytes) as a JSON object, lone surrogates repaired.

    Raises:
        StateFileError: not JSON, not an object, or nested deeper than
            ``MAX_STATE_DEPTH``.
    """
    try:
        value = json.loads(data)
        if _SURROGATE_ESCAPE_RE.search(data):
            value = json.loads(repair_surrogates(json.dumps(value, ensure_ascii=False)))
    except (ValueError, RecursionError):
        raise StateFileError(f"{path} is not valid JSON (corrupt state file)") from None
    if not isinstance(value, dict):
        raise StateFileError(f"{path} does not hold a JSON object (corrupt state file)")
    if _too_deep(data, value):
        raise StateFileError(
            f"{path} nests deeper than {MAX_STATE_DEPTH} levels (corrupt state file)"
        )
    return value


def _too_deep(data: bytes, value: dict[str, Any]) -> bool:
    """Whether ``value`` (parsed from ``data``) nests deeper than ``MAX_STATE_DEPTH``;
    walked without recursion, and only where ``data`` has enough brackets to."""
    if data.count(b"{") + data.count(b"[") <= MAX_STATE_DEPTH:
        return False
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        inner = item.values() if isinstance(item, dict) else item
        for child in inner:
            if isinstance(child, dict | list):
                if depth >= MAX_STATE_DEPTH:
                    return True
                stack.append((child, depth + 1))
    return False


def check_state_json(data: dict[str, Any], path: Path | str = "state.json") -> None:
    """Refuse what ``decode_state`` refuses: a field of the wrong JSON type
    (``store.state_shape``) or a ``config`` ``RunConfig.from_json`` would not read.

    Raises:
        StateFileError: the first such field, as one line.
    """
    check_fields(data, SHAPE, "", path)
    if data.get("config") is not None:
        from autopilot.config_json import check_config_json

        check_config_json(data["config"], source=str(path))


def read_state_view(path: Path) -> StateView:
    """``read_state_json`` checked (``check_state_json``), as a ``StateView``.

    Raises:
        StateFileError: see ``read_state_json`` and ``check_state_json``.
    """
    data = read_state_json(path)
    check_state_json(data, path)
    return StateView(data)


def read_state_view_quietly(path: Path) -> StateView | None:
    """``read_state_view``, or None where ``read_state_quietly`` gives None."""
    try:
        return read_state_view(path)
    except StateFileError:
        return None


_REDACTED_FIELDS = ("terminationNote", "terminationReason", "stopReason")
"""Fields that may quote an agent (its error text): written with secrets redacted."""


def encode_state_json(data: dict[str, Any]) -> bytes:
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
        for key, value in data.items()
    }
    text = json.dumps(shown, indent=2, ensure_ascii=False, allow_nan=False)
    return (repair_surrogates(text) + "\n").encode()


def update_state_json(path: Path, change: Callable[[StateView], None]) -> StateView:
    """Apply ``change`` to the checked ``state.json`` under its lock (``StateStore``'s,
    ``state.json.lock``), bump ``version`` and write it back atomically (fsynced).

    ``change`` sets fields with ``StateView.set``; it may raise to write nothing.

    Returns:
        The state as written.

    Raises:
        StateFileError: the file is missing or corrupt (``read_state_view``) or cannot
            be written, or the lock could not be had in 30 seconds.
    """
    with holding(
        path.with_name(path.name + ".lock"), timeout_seconds=LOCK_TIMEOUT_SECONDS, what=path
    ):
        view = read_state_view(path)
        change(view)
        view.set("version", view.int_of("version") + 1)
        try:
            write_atomically(path, encode_state_json(view.data))
        except (OSError, ValueError) as error:
            number = error.errno if isinstance(error, OSError) else None
            detail = error.strerror if isinstance(error, OSError) else str(error)
            raise StateFileError(f"cannot write {path}: {detail or error}", errno=number) from None
        return view


class StateView:
    """A checked ``state.json`` object read as ``decode_state`` reads it: each property
    is the ``RunState`` attribute of the same name (``tests/store/test_state_file.py``
    holds them equal). ``data`` is the object itself; ``extra`` its unknown fields.

    Args:
        data: The parsed JSON, checked by ``check_state_json``.
    """

    __slots__ = ("data",)

    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data

    def set(self, key: str, value: object) -> None:
        """Set field ``key`` (a ``state.json`` name), in place if it is there, else last."""
        self.data[key] = value

    def int_of(self, key: str, default: int = 0) -> int:
        """Field ``key`` as a whole number, as ``decode_state`` reads it."""
        value = self.data.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            return int(value)
        return default

    def _int_or_none(self, key: str) -> int | None:
        value = self.data.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            return int(value)
        return None

    def _str(self, key: str) -> str | None:
        value = self.data.get(key)
        return value if isinstance(value, str) else None

    @property
    def extra(self) -> dict[str, Any]:
        """The fields ``RunState`` does not model (``RunState.extra``)."""
        return {key: value for key, value in self.data.items() if key not in KNOWN_FIELDS}

    @property
    def run_id(self) -> str:
        """``runId``."""
        return self._str("runId") or ""

    @property
    def mode(self) -> str:
        """``mode``: ``prompt``, ``backlog``, ``hook``, …"""
        return self._str("mode") or "prompt"

    @property
    def cwd(self) -> str | None:
        """``cwd``: the work tree the agent runs in."""
        return self._str("cwd")

    @property
    def terminated(self) -> bool:
        """``terminated``: the run has ended."""
        return bool(self.data.get("terminated"))

    @property
    def termination_reason(self) -> str | None:
        """``terminationReason``."""
        return self._str("terminationReason")

    @property
    def status(self) -> RunStatus:
        """``status``, derived as ``decode_state`` derives it when it is missing or
        from a newer version."""
        text = self.data.get("status")
        if isinstance(text, str):
            try:
                return RunStatus(text)
            except ValueError:
                pass
        if self.terminated:
            reason = self.termination_reason
            if reason == NODE_COMPLETE_REASON:
                return RunStatus.COMPLETED
            return RunStatus.ERROR if reason in NODE_FAILED_REASONS else RunStatus.STOPPED
        return RunStatus.PAUSED if self.data.get("paused") else RunStatus.RUNNING

    @property
    def paused(self) -> bool:
        """``paused``: a pause is asked for."""
        return bool(self.data.get("paused"))

    @property
    def paused_at_ms(self) -> int | None:
        """``pausedAt``: when the driver paused (epoch ms)."""
        return self._int_or_none("pausedAt")

    @property
    def total_paused_ms(self) -> int:
        """``totalPausedMs``."""
        return self.int_of("totalPausedMs")

    @property
    def stop_requested(self) -> bool:
        """``stopRequested``."""
        return bool(self.data.get("stopRequested"))

    @property
    def stop_now(self) -> bool:
        """``stopNow``."""
        return bool(self.data.get("stopNow"))

    @property
    def hold(self) -> str | None:
        """``hold``: why the driver holds the run paused until a file is fixed."""
        return self._str("hold")

    def _float_or_none(self, key: str) -> float | None:
        value = self.data.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
        return None

    @property
    def pid(self) -> int | None:
        """``pid``: the driver's."""
        return self._int_or_none("pid")

    @property
    def pid_start_time(self) -> float | None:
        """``pidStartTime``: the driver's start time (epoch s)."""
        return self._float_or_none("pidStartTime")

    @property
    def pid_command(self) -> str | None:
        """``pidCommand``: the driver's command line."""
        return self._str("pidCommand")

    @property
    def host(self) -> str | None:
        """``host``: the driver's host name."""
        return self._str("host")

    @property
    def supervisor_pid(self) -> int | None:
        """``supervisorPid``."""
        return self._int_or_none("supervisorPid")

    @property
    def supervisor_start_time(self) -> float | None:
        """``supervisorStartTime`` (epoch s)."""
        return self._float_or_none("supervisorStartTime")

    @property
    def version(self) -> int:
        """``version``: bumped by every write."""
        return self.int_of("version")
