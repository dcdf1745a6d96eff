"""Telling the person who left a run what it did, through apprise (desktop, ntfy, Slack,
email, webhooks, …: https://github.com/caronc/apprise/wiki).

Which events notify, and with what words, is a pure function (``notification_for``):
a terminal ``complete`` or ``abort``, a ``gate`` (a question or an approval waiting for
the user), a usage-limit wait longer than ten minutes, and ``supervisor_giveup``.

``Notifier`` sends each notification on a thread of its own, so a failing or slow
notifier never delays or stops the run: the caller never waits, apprise's own
connect/read timeouts bound each request, and ``close`` waits a bounded time for what
is in flight. A URL that fails is reported once (``drain_failures``), with its scheme
and host only, since a URL may carry a token.
"""

from __future__ import annotations

import functools
import re
import threading
import time
import urllib.parse
import warnings
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from autopilot.core.redact import redact as redact_text
from autopilot.errors import UsageError

LONG_WAIT_MS = 10 * 60 * 1000
"""A usage-limit wait longer than this is worth a notification."""

CLOSE_TIMEOUT_SECONDS = 10.0
"""``close`` waits at most this long for notifications in flight."""


class Tone(StrEnum):
    """How a notification looks; the values are apprise's ``NotifyType`` values."""

    INFO = "info"
    SUCCESS = "success"
    WARNING = "warning"
    FAILURE = "failure"


@dataclass(frozen=True)
class Notification:
    """One notification: a title, a body and a tone."""

    title: str
    body: str
    tone: Tone


def _clock_time(ms: int) -> str:
    return time.strftime("%H:%M %Z", time.localtime(ms / 1000))


def notification_for(event: Mapping[str, Any], run_id: str) -> Notification | None:
    """The notification an event deserves, or None.

    Args:
        event: An event as written to ``events.jsonl``.
        run_id: The run, named in the title.
    """
    kind = event.get("type")
    reason = event.get("reason")
    note = event.get("note")
    detail = f": {note}" if isinstance(note, str) and note else ""
    if kind == "complete":
        return Notification(
            f"autopilot: {run_id} completed", f"completed ({reason}){detail}", Tone.SUCCESS
        )
    if kind == "abort":
        tone = Tone.WARNING if reason == "user_stopped" else Tone.FAILURE
        return Notification(f"autopilot: {run_id} ended", f"ended ({reason}){detail}", tone)
    if kind == "supervisor_giveup":
        return Notification(
            f"autopilot: {run_id} gave up",
            f"the daemon kept crashing and the supervisor gave up{detail}",
            Tone.FAILURE,
        )
    if kind == "gate" and event.get("state", "waiting") == "waiting":  # not answered, released
        question = event.get("question") or event.get("note") or "a decision is waiting"
        return Notification(
            f"autopilot: {run_id} is waiting for you",
            f"{question} (answer with: autopilot answer {run_id} TEXT, "
            f"or autopilot approve {run_id})",
            Tone.WARNING,
        )
    if kind == "rate_limited":
        until, ts = event.get("waitingUntil"), event.get("ts")
        if isinstance(until, int) and isinstance(ts, int) and until - ts > LONG_WAIT_MS:
            return Notification(
                f"autopilot: {run_id} is waiting for a usage limit",
                f"waiting until {_clock_time(until)} for the usage limit to reset{detail}",
                Tone.INFO,
            )
    return None


_LOAD_LOCK = threading.Lock()


@functools.cache
def _apprise() -> Any:
    """The ``apprise`` module, its plugins loaded once with deprecation warnings from
    its dependencies silenced (``imghdr`` via PGPy on Python 3.11 and 3.12)."""
    with _LOAD_LOCK, warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        import apprise
        import apprise.utils.pgp

        apprise.Apprise().add("json://127.0.0.1/")  # loads every plugin
        return apprise


_SECRET_QUERY_KEY = re.compile(
    r"(?i)(token|key|secret|pass|pwd|pw|auth|sig|signature|credential|webhook)"
)
"""A query parameter whose name says its value is a credential (``?token=…``)."""

_TOKEN_LIKE = re.compile(r"(?=[^./]*[0-9])(?=[^./]*[A-Za-z])[A-Za-z0-9_-]{24,}")
"""A host or path segment that is a credential apprise keeps there (a Slack or
Discord webhook token): 24 or more letters and digits mixed, no dot."""

_HIDDEN = "[REDACTED]"


def redact(url: str) -> str:
    """A notification URL as given, with its credentials hidden: the user and password
    (``user:pass@``), the value of a query parameter named like a credential
    (``token``, ``key``, ``secret``, ``pass``…), a host or path segment shaped like a
    token (``_TOKEN_LIKE``) and any well-known secret shape (``core.redact``). The
    scheme, host, port and the rest of the path and query are kept, so the URL shown
    is the one notifications go to."""
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return "<unparsable URL>"
    if not parts.scheme:
        return "<URL>"
    netloc = parts.netloc
    if "@" in netloc:
        netloc = f"{_HIDDEN}@{netloc.rpartition('@')[2]}"
    netloc = redact_text(_TOKEN_LIKE.sub(_HIDDEN, netloc))
    path = "/".join(_hide_segment(segment) for segment in parts.path.split("/"))
    query = "&".join(_hide_query_value(item) for item in parts.query.split("&") if parts.query)
    return urllib.parse.urlunsplit((parts.scheme, netloc, path, query, parts.fragment))


def _hide_segment(segment: str) -> str:
    return _HIDDEN if _TOKEN_LIKE.fullmatch(segment) else redact_text(segment)


def _hide_query_value(item: str) -> str:
    name, sep, value = item.partition("=")
    if sep and value and _SECRET_QUERY_KEY.search(name):
        return f"{name}={_HIDDEN}"
    return redact_text(item)


def check_urls(urls: Iterable[str]) -> tuple[str, ...]:
    """Check that apprise can send to every URL.

    Raises:
        UsageError: a URL apprise does not support or cannot parse.
    """
    apprise = _apprise()
    checked = []
    for url in urls:
        if not apprise.Apprise().add(url):
            raise UsageError(
                f"--notify {redact(url)}: not a notification URL apprise supports "
                "(see https://github.com/caronc/apprise/wiki)"
            )
        checked.append(url)
    return tuple(checked)


class Notifier:
    """Sends notifications to a fixed set of apprise URLs without ever blocking.

    Args:
        urls: Apprise URLs (``json://host:port/path``, ``ntfy://topic``, …).
    """

    def __init__(self, urls: Iterable[str]) -> None:
        self.urls = tuple(urls)
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._failed: set[str] = set()
        self._failures: list[str] = []

    def send(self, notification: Notification) -> None:
        """Send ``notification`` to every URL in the background; returns at once."""
        for url in self.urls:
            thread = threading.Thread(
                target=self._deliver, args=(url, notification), name="notify", daemon=True
            )
            with self._lock:
                self._threads = [t for t in self._threads if t.is_alive()]
                self._threads.append(thread)
            thread.start()

    def _deliver(self, url: str, notification: Notification) -> None:
        problem: str | None = None
        try:
            apprise = _apprise()
            sender = apprise.Apprise()
            if not sender.add(url):
                problem = "not a URL apprise supports"
            elif not sender.notify(
                body=notification.body,
                title=notification.title,
                notify_type=apprise.NotifyType(notification.tone.value),
            ):
                problem = "sending failed"
        except Exception as error:  # a notifier must never take the run down
            problem = f"{type(error).__name__}: {error}"
        if problem is not None:
            self._report(url, problem)

    def _report(self, url: str, problem: str) -> None:
        with self._lock:
            if url in self._failed:
                return
            self._failed.add(url)
            self._failures.append(
                f"notification to {redact(url)} failed ({problem}); "
                "later failures of this URL are not reported"
            )

    def drain_failures(self) -> list[str]:
        """Failures reported since the last call, one line each (each URL once)."""
        with self._lock:
            failures, self._failures = self._failures, []
        return failures

    def close(self, timeout_seconds: float = CLOSE_TIMEOUT_SECONDS) -> bool:
        """Wait up to ``timeout_seconds`` in all for notifications in flight.

        Returns:
            True if all of them finished; those that did not are abandoned (their
            threads are daemons and end with the process).
        """
        deadline = time.monotonic() + timeout_seconds
        with self._lock:
            threads = list(self._threads)
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        return not any(t.is_alive() for t in threads)


class RunNotifier:
    """Tells a run's notification URLs about the events that matter
    (``notification_for``); called with every event the driver writes.

    Args:
        urls: Apprise URLs.
        run_id: The run.
    """

    def __init__(self, urls: Iterable[str], run_id: str) -> None:
        self.notifier = Notifier(urls)
        self.run_id = run_id

    def __call__(self, event: Mapping[str, Any]) -> None:
        """Send the notification ``event`` calls for, if any (never blocks)."""
        notification = notification_for(event, self.run_id)
        if notification is not None:
            self.notifier.send(notification)

    def drain_failures(self) -> list[str]:
        """See ``Notifier.drain_failures``."""
        return self.notifier.drain_failures()

    def close(self) -> None:
        """See ``Notifier.close``."""
        self.notifier.close()
