"""A run's inbox: one file per message, never lost across ``kill -9``
(``docs/architecture.md``, "Messages to the agent").

Layout, in the run folder (the maildir pattern; claim by rename)::

    inbox/.lock        fcntl lock, held while a message is queued or claimed
    inbox/tmp/ID.json  being written by a sender
    inbox/new/ID.json  queued: durable, ``message_queued`` logged
    inbox/cur/ID.json  taken by the driver for the next attempt (``core.delivery``)
    inbox/done/ID.json retired: its iteration was concluded
    inbox/bad/NAME     a file that is not a message, put aside

Queueing (``put``), under the lock: write ``tmp/ID.json`` and fsync it, append
``message_queued``, rename into ``new/`` and fsync the folder. A file in ``new/`` thus
always has its event. Under the lock, anything in ``tmp/`` was left by a sender that
died; ``claim`` adopts it if it is whole (a message that was written but whose sender
never returned), logging ``message_queued`` if the sender had not. A message is
durable once ``put`` returns.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from autopilot.core.item_text import text_problem
from autopilot.core.message_ids import MAX_MESSAGE_CHARS, is_message_id, message_id
from autopilot.core.text import excerpt
from autopilot.errors import StateFileError, UsageError
from autopilot.store.flock import holding
from autopilot.store.private import make_private_dir, open_private

TYPE_CHECKING = False  # as typing's, without importing typing at run time
if TYPE_CHECKING:
    from typing import Any

    from autopilot.core.delivery import Message

INBOX_DIR = "inbox"
LOCK_TIMEOUT_SECONDS = 30.0
_SUFFIX = ".json"


def new_message_id(now_ms: int) -> str:
    """A fresh message id for a message queued at ``now_ms``."""
    return message_id(now_ms, os.urandom(4).hex())  # what secrets.token_hex(4) does


def check_text(text: str) -> str:
    """A message's text, checked.

    Raises:
        UsageError: empty, longer than ``MAX_MESSAGE_CHARS`` characters, or not
            Unicode text (a lone surrogate: it could not be handed to the agent).
    """
    if not text.strip():
        raise UsageError("the message is empty")
    if len(text) > MAX_MESSAGE_CHARS:
        raise UsageError(f"the message is {len(text)} characters long; at most {MAX_MESSAGE_CHARS}")
    if (problem := text_problem(text)) is not None:
        raise UsageError(f"the message has {problem} (an argument that is not UTF-8)")
    return text


def queued_fields(message: dict[str, Any], *, autopilot_on: bool) -> dict[str, Any]:
    """The fields of a ``message_queued`` event for the message whose file's JSON
    (``Message.to_json``) is ``message``."""
    return {
        "messageId": message["id"],
        "source": message["source"],
        "kind": message["kind"],
        "excerpt": excerpt(message["text"]),
        "chars": len(message["text"]),
        "autopilotOn": autopilot_on,
    }


def queue_message_json(
    run_folder: Path, message: dict[str, Any], now_ms: Callable[[], int], *, autopilot_on: bool
) -> None:
    """Queue ``message`` (its file's JSON, ``Message.to_json``) in the run's inbox with
    its ``message_queued`` event, through an event log of its own (``put_json``);
    durable when this returns. ``loop.messages.queue_message`` and ``send`` to a run
    whose driver is alive both queue this way.

    Raises:
        StateFileError: the inbox or the log cannot be written.
    """
    from autopilot.core.vocabulary import EventType
    from autopilot.store.events import EventLog
    from autopilot.store.run_files import EVENTS_FILE

    log = EventLog(run_folder / EVENTS_FILE, run_folder.name, now_ms)

    def record() -> None:
        log.emit(EventType.MESSAGE_QUEUED, **queued_fields(message, autopilot_on=autopilot_on))
        log.sync()

    try:
        Inbox(run_folder).put_json(message, record)
    finally:
        log.close()


def _fsync_dir(path: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


class Inbox:
    """The inbox of one run.

    Args:
        run_folder: The run's folder; ``inbox/`` is made inside it when first used.
    """

    def __init__(self, run_folder: Path) -> None:
        self.root = run_folder / INBOX_DIR

    def _dir(self, name: str) -> Path:
        return self.root / name

    def _ensure(self) -> None:
        try:
            make_private_dir(self.root, exist_ok=True)
            for name in ("tmp", "new", "cur", "done"):
                make_private_dir(self._dir(name), exist_ok=True)
        except OSError as error:
            raise StateFileError(f"cannot create {self.root}: {error.strerror or error}") from None

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        self._ensure()
        # A lock of its own for each acquisition: threads sharing this inbox exclude
        # each other like processes do.
        with holding(self.root / ".lock", timeout_seconds=LOCK_TIMEOUT_SECONDS, what=self.root):
            yield

    def put(self, message: Message, record: Callable[[Message], object]) -> None:
        """Queue ``message`` durably; ``record`` appends its ``message_queued`` event.

        Args:
            message: The message (its id names the file).
            record: Called once the file is on disk and before it becomes visible to
                the driver, so every queued file has its event.

        Raises:
            StateFileError: the message cannot be written (a full disk, permissions).
        """
        self.put_json(message.to_json(), lambda: record(message))

    def put_json(self, message: dict[str, Any], record: Callable[[], object]) -> None:
        """``put`` of a message as its file's JSON (``Message.to_json``: ``id``,
        ``source``, ``kind``, ``text``, ``queuedAt``), without building a ``Message``.

        Raises:
            StateFileError: the message cannot be written (a full disk, permissions).
        """
        with self._locked():
            tmp = self._dir("tmp") / (message["id"] + _SUFFIX)
            data = json.dumps(message, ensure_ascii=False).encode("utf-8", "replace")
            try:
                fd = open_private(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
                with open(fd, "wb") as handle:
                    handle.write(data)
                    handle.flush()
                    os.fsync(handle.fileno())
            except OSError as error:
                tmp.unlink(missing_ok=True)
                raise StateFileError(
                    f"cannot write message to {tmp}: {error.strerror or error}"
                ) from None
            record()
            try:
                os.replace(tmp, self._dir("new") / tmp.name)
            except OSError as error:
                raise StateFileError(
                    f"cannot queue message {tmp}: {error.strerror or error}"
                ) from None
            _fsync_dir(self._dir("new"))

    def claim(
        self,
        record_orphan: Callable[[Message], object],
        queued_ids: Callable[[], set[str]],
    ) -> tuple[Message, ...]:
        """Take every queued message for the driver; returns all taken messages.

        Messages left in ``tmp/`` by a sender that died are adopted first: if whole,
        they are queued, with ``record_orphan`` called for those whose id is not in
        ``queued_ids()`` (called only when there are such files); a partial one is
        dropped (its sender never said it was sent).

        Returns:
            Every message in ``cur/``: those claimed now and those taken earlier
            and not retired (a crash, a retried attempt), oldest first.

        Raises:
            StateFileError: the inbox cannot be locked or changed.
        """
        if not self._queued():  # the usual case: nothing to claim, no lock to take
            return self.taken()
        with self._locked():
            orphans = sorted(self._dir("tmp").glob("*" + _SUFFIX))
            if orphans:
                known = queued_ids()
                for path in orphans:
                    message = self._load(path)
                    if message is None:
                        continue
                    if message.id not in known:
                        record_orphan(message)
                    self._move(path, "new")
            claimed = sorted(self._dir("new").glob("*" + _SUFFIX))
            for path in claimed:
                self._move(path, "cur")
            if claimed:  # nothing moved, nothing to make durable
                _fsync_dir(self._dir("cur"))
        return self.taken()

    def _queued(self) -> bool:
        """Whether ``tmp/`` or ``new/`` may hold a message (True where either cannot
        be listed: the locked claim makes the folders and looks)."""
        try:
            return any(
                name.endswith(_SUFFIX)
                for folder in ("tmp", "new")
                for name in os.listdir(self._dir(folder))
            )
        except OSError:
            return True

    def _move(self, path: Path, folder: str) -> None:
        try:
            os.replace(path, self._dir(folder) / path.name)
        except FileNotFoundError:
            pass
        except OSError as error:
            raise StateFileError(f"cannot move {path}: {error.strerror or error}") from None

    def _load(self, path: Path) -> Message | None:
        """The message in ``path``; a file that is not one is put aside in ``bad/``."""
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError:
            return None
        try:
            from autopilot.core.delivery import Message  # a driver's, claiming

            message = Message.from_json(json.loads(data))
            if path.name != message.id + _SUFFIX:
                raise ValueError("file name and id differ")
        except (ValueError, RecursionError):
            with contextlib.suppress(OSError):
                make_private_dir(self._dir("bad"), exist_ok=True)
                os.replace(path, self._dir("bad") / path.name)
            return None
        return message

    def _read_folder(self, name: str) -> tuple[Message, ...]:
        folder = self._dir(name)
        try:
            names = os.listdir(folder)  # every iteration: plain names, no glob
        except OSError:
            return ()
        found = []
        for file_name in sorted(names):
            if not file_name.endswith(_SUFFIX) or not is_message_id(file_name[: -len(_SUFFIX)]):
                continue
            message = self._load(folder / file_name)
            if message is not None:
                found.append(message)
        return tuple(found)

    def pending(self) -> tuple[Message, ...]:
        """Queued messages not yet taken by the driver, oldest first (no lock)."""
        return self._read_folder("new")

    def taken(self) -> tuple[Message, ...]:
        """Messages the driver has taken and not retired, oldest first (no lock)."""
        return self._read_folder("cur")

    def taken_ids(self) -> tuple[str, ...]:
        """The ids of the files in ``cur/``."""
        folder = self._dir("cur")
        if not folder.is_dir():
            return ()
        return tuple(sorted(p.name[: -len(_SUFFIX)] for p in folder.glob("*" + _SUFFIX)))

    def retire(self, ids: Iterable[str]) -> tuple[str, ...]:
        """Move the files of ``ids`` from ``cur/`` to ``done/``; returns the ids no
        longer in ``cur/`` (moved now or before).

        Raises:
            StateFileError: a file could not be moved.
        """
        gone = []
        self._ensure()
        for ident in ids:
            if not is_message_id(ident):
                continue
            source = self._dir("cur") / (ident + _SUFFIX)
            self._move(source, "done")
            gone.append(ident)
        _fsync_dir(self._dir("done"))
        return tuple(gone)
