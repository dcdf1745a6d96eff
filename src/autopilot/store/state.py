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
run was armed with, so a restart applies the same limits) and ``version``.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import filelock

from autopilot.errors import StateFileError

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


def read_state(path: Path) -> dict[str, Any]:
    """Read a ``state.json`` without locking.

    Raises:
        StateFileError: the file is missing, unreadable, not JSON, or not an object.
    """
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise StateFileError(f"{path} does not exist") from None
    except OSError as error:
        raise StateFileError(f"cannot read {path}: {error.strerror or error}") from None
    try:
        value = json.loads(data)
    except (ValueError, RecursionError):
        raise StateFileError(f"{path} is not valid JSON (corrupt state file)") from None
    if not isinstance(value, dict):
        raise StateFileError(f"{path} does not hold a JSON object (corrupt state file)")
    return value


def read_state_quietly(path: Path) -> dict[str, Any] | None:
    """``read_state``, or None when it cannot be read."""
    try:
        return read_state(path)
    except StateFileError:
        return None


def write_atomically(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` via a temp file, fsync and rename.

    Raises:
        OSError: the write failed; ``path`` is unchanged and the temp file removed.
    """
    tmp = path.with_name(f"{path.name}.tmp.{os.getpid()}.{threading.get_ident()}")
    try:
        with tmp.open("wb") as handle:
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


def encode_state(state: dict[str, Any]) -> bytes:
    """Two-space indented JSON with a trailing newline (the seed's layout)."""
    return (json.dumps(state, indent=2, ensure_ascii=False, allow_nan=False) + "\n").encode()


class StateStore:
    """Locked read-modify-write access to one run's ``state.json``.

    Args:
        path: The ``state.json`` path; its lock is ``state.json.lock`` beside it.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = filelock.UnixFileLock(
            str(path.with_name(path.name + ".lock")), timeout=LOCK_TIMEOUT_SECONDS
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
            fallback: Used instead of the file when it is corrupt; the corrupt file
                is kept beside it as ``state.json.corrupt-<version>`` so nothing is
                lost. Without a fallback a corrupt file raises.

        Returns:
            The state as written (with its new ``version``).

        Raises:
            StateFileError: the file is corrupt (and no fallback) or cannot be
                written, or the lock could not be had in 30 seconds.
        """
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
