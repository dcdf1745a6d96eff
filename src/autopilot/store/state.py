"""``state.json`` on disk: locked read-modify-write, atomic replace (``docs/formats.md``).

Every write takes an ``fcntl`` lock on ``state.json.lock`` (released by the OS when
its holder dies, so a crash never leaves a run locked), reads the current file,
applies a change to its ``RunState``, bumps ``version``, writes a temp file, fsyncs
it and renames it into place. Concurrent ``pause`` and ``stop`` from two terminals
never lose an update. Readers never take the lock: a rename is atomic, so they see
the old file or the new one, never a mix.

The fields and their types are ``store.run_state``'s (``docs/formats.md``).
"""

from __future__ import annotations

import contextlib
import copy
import os
from collections.abc import Callable, Iterator
from pathlib import Path

from autopilot.core.structs import replace
from autopilot.errors import StateFileError
from autopilot.store.atomic import write_atomically
from autopilot.store.flock import holding
from autopilot.store.private import make_private_dir
from autopilot.store.run_state import RunState, decode_state
from autopilot.store.state_file import (
    LOCK_TIMEOUT_SECONDS,
    encode_state_json,
    parse_state_json,
    read_state_bytes,
    read_state_json,
)

__all__ = [
    "LOCK_TIMEOUT_SECONDS",
    "StateStore",
    "encode_state",
    "read_state",
    "read_state_json",
    "read_state_quietly",
]

TYPE_CHECKING = False  # as typing's, without importing typing at run time
if TYPE_CHECKING:
    from typing import Any


def read_state(path: Path) -> RunState:
    """Read a ``state.json`` without locking and decode it (``decode_state``).

    Raises:
        StateFileError: the file is missing, unreadable, not JSON, not an object, or
            a field autopilot reads has the wrong type.
    """
    return decode_state(read_state_json(path), path)


def copy_state(state: RunState) -> RunState:
    """A copy of ``state`` that shares nothing a change may mutate in place: its
    ``spend`` (and its ``tokens``), ``loop`` and ``extra`` are copied, the rest is
    immutable (strings, tuples, frozen Structs). Far cheaper than ``deepcopy``."""
    copied = copy.copy(state)
    spend = state.spend
    copied.spend = replace(spend, tokens=replace(spend.tokens))
    copied.loop = replace(state.loop)
    if state.extra:
        copied.extra = copy.deepcopy(state.extra)
    else:
        copied.extra = {}
    return copied


def read_state_quietly(path: Path) -> RunState | None:
    """``read_state``, or None when it cannot be read."""
    try:
        return read_state(path)
    except StateFileError:
        return None


def encode_state(state: RunState | dict[str, Any]) -> bytes:
    """``encode_state_json`` of ``state`` (a ``RunState``'s ``to_json``).

    Raises:
        ValueError: NaN or an infinity in a number, or a circular reference.
        TypeError: a value JSON cannot hold.
    """
    return encode_state_json(state.to_json() if isinstance(state, RunState) else state)


class StateStore:
    """Locked read-modify-write access to one run's ``state.json``.

    Args:
        path: The ``state.json`` path; its lock is ``state.json.lock`` beside it.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock_path = path.with_name(path.name + ".lock")
        # The bytes this store last wrote or decoded, and their state: a file that
        # still holds them is not decoded and checked again (a driver reads its own
        # writes back at every iteration).
        self._known: tuple[bytes, RunState] | None = None

    def read(self) -> RunState:
        """The current state, read without the lock.

        Raises:
            StateFileError: see ``read_state``.
        """
        data = read_state_bytes(self.path)
        known = self._known
        if known is not None and known[0] == data:
            return copy_state(known[1])
        state = decode_state(parse_state_json(data, self.path), self.path)
        self._known = (data, copy_state(state))
        return state

    def create(self, state: RunState) -> RunState:
        """Write the first version of the file (``version`` 1).

        Raises:
            StateFileError: the file already exists or cannot be written.
        """
        with self._locked():
            if self.path.exists():
                raise StateFileError(f"{self.path} already exists")
            state = replace(state, version=1)
            self._write(state)
            return state

    def update(
        self,
        change: Callable[[RunState], None],
        *,
        fallback: RunState | None = None,
        sync_dir: bool = True,
        before_rename: Callable[[], None] | None = None,
    ) -> RunState:
        """Apply ``change`` to the state under the lock and write it back.

        Args:
            change: Changes the state in place.
            fallback: Used instead of the file when it is corrupt or missing; the
                corrupt file is kept beside it as ``state.json.corrupt-<version>`` so
                nothing is lost, and a run folder that was deleted is made again
                (0700). Without a fallback a corrupt file raises.
            sync_dir: See ``write_atomically``.
            before_rename: See ``write_atomically``.

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
                state = self.read()
            except StateFileError:
                if fallback is None:
                    raise
                self._keep_corrupt_copy(fallback)
                state = copy.deepcopy(fallback)
            change(state)
            state.version += 1
            self._write(state, sync_dir=sync_dir, before_rename=before_rename)
            return state

    def _keep_corrupt_copy(self, fallback: RunState) -> None:
        aside = self.path.with_name(f"{self.path.name}.corrupt-{fallback.version}")
        try:
            if self.path.exists():
                os.replace(self.path, aside)
        except OSError:
            pass

    def _write(
        self,
        state: RunState,
        *,
        sync_dir: bool = True,
        before_rename: Callable[[], None] | None = None,
    ) -> None:
        self._known = None
        try:
            data = encode_state(state)
            write_atomically(self.path, data, sync_dir=sync_dir, before_rename=before_rename)
            self._known = (data, copy_state(state))
        except (OSError, ValueError) as error:
            number = error.errno if isinstance(error, OSError) else None
            detail = error.strerror if isinstance(error, OSError) else str(error)
            raise StateFileError(
                f"cannot write {self.path}: {detail or error}", errno=number
            ) from None

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        # A lock of its own for each acquisition (an open and a flock): threads that
        # share this store exclude each other like processes do.
        with holding(self._lock_path, timeout_seconds=LOCK_TIMEOUT_SECONDS, what=self.path):
            yield
