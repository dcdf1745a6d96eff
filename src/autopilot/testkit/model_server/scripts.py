"""Scripts: what the fake model does, decided from the conversation alone.

A :class:`Script` is a list of :class:`Rule` lines; the first rule that matches the
request's :class:`~.conversation.Conversation` gives the :data:`Action`. Actions are
logical ("write hello.txt", "fail with a rate limit"); each wire renders them in its
own format and maps them to the CLI's real tools. Nothing here knows a wire format.

The built-in scripts are in :mod:`.library`. The one time-dependent answer is the
recovery window: a server built with
``fail_until_epoch_ms`` (or running a script with ``fail_for_seconds``) answers 429
until that instant and follows the script afterwards (:func:`decide`). The server
stays stateless; only the clock moves.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType

from autopilot.testkit.model_server.conversation import Conversation


@dataclass(frozen=True)
class WriteFile:
    """Create or overwrite ``path`` (relative to the agent's cwd) with ``content``."""

    path: str
    content: str


@dataclass(frozen=True)
class RunShell:
    """Run ``command`` with the agent's shell tool."""

    command: str


@dataclass(frozen=True)
class Say:
    """End the turn with ``text``."""

    text: str


Content = WriteFile | RunShell | Say
"""An answer the model gives: a tool call or the turn's final text."""


class ErrorKind(StrEnum):
    """Failures a script can ask for; each wire renders them as its API does."""

    AUTH = "auth"
    RATE_LIMIT = "rate_limit"
    USAGE_LIMIT = "usage_limit"
    SERVER = "server"
    BAD_REQUEST = "bad_request"


STATUS = MappingProxyType(
    {
        ErrorKind.AUTH: 401,
        ErrorKind.RATE_LIMIT: 429,
        ErrorKind.USAGE_LIMIT: 429,
        ErrorKind.SERVER: 500,
        ErrorKind.BAD_REQUEST: 400,
    }
)
"""The HTTP status of each error kind."""


@dataclass(frozen=True)
class HttpError:
    """Answer with an HTTP error; the wire renders its own body and headers.

    Attributes:
        kind: What failed; gives the status (see :data:`STATUS`).
        retry_after_seconds: When set, the answer announces a reset this far away
            (``retry-after`` and the API's reset headers or body fields); None sends
            no reset field at all.
        message: Overrides the wire's realistic default message.
    """

    kind: ErrorKind
    retry_after_seconds: float | None = None
    message: str | None = None

    @property
    def status(self) -> int:
        """The HTTP status code, e.g. 429."""
        return STATUS[self.kind]

    def resets_at_ms(self, now_ms: int) -> int | None:
        """The announced reset instant in epoch milliseconds, or None."""
        if self.retry_after_seconds is None:
            return None
        return now_ms + math.ceil(self.retry_after_seconds * 1000)


@dataclass(frozen=True)
class Slow:
    """Stream ``action`` normally but wait ``delay_seconds`` before each chunk."""

    action: Content
    delay_seconds: float = 0.25


@dataclass(frozen=True)
class Stall:
    """Send the headers and the first event of a text answer, then nothing.

    The connection stays open for ``seconds`` (or until the server stops).
    """

    seconds: float = 3600.0


@dataclass(frozen=True)
class Drop:
    """Send the first ``after_chunks`` chunks of ``action``, then close the connection.

    The answer uses chunked transfer encoding and never sends the final empty chunk,
    so clients see a body cut off mid-stream.
    """

    action: Content = Say("This answer will be cut off")
    after_chunks: int = 2


Action = Content | HttpError | Slow | Stall | Drop
"""Everything a rule can answer."""

STALL_TEXT = "Thinking it over"
"""The text whose first event a stalled answer sends."""


@dataclass(frozen=True)
class Delivery:
    """How the chunks of an answer go out.

    Attributes:
        delay_seconds: Wait before each chunk.
        cut_after: Send only this many chunks, then close the connection.
        stall_seconds: Send only the first event, then nothing for this long.
    """

    delay_seconds: float = 0.0
    cut_after: int | None = None
    stall_seconds: float | None = None


def delivery(action: Content | Slow | Stall | Drop) -> tuple[Content, Delivery]:
    """Split ``action`` into what to answer and how to send it."""
    if isinstance(action, Slow):
        return action.action, Delivery(delay_seconds=action.delay_seconds)
    if isinstance(action, Drop):
        return action.action, Delivery(cut_after=action.after_chunks)
    if isinstance(action, Stall):
        return Say(STALL_TEXT), Delivery(stall_seconds=action.seconds)
    return action, Delivery()


@dataclass(frozen=True)
class Rule:
    """One line of a script: when every given condition holds, answer ``action``.

    Attributes:
        action: What to answer.
        turn: Match only this turn; None matches any.
        step: Match only this step; None matches any.
        result_contains: Match only if the latest tool result contains this text.
        prompt_contains: Match only if the current prompt contains this text.
    """

    action: Action
    turn: int | None = None
    step: int | None = None
    result_contains: str | None = None
    prompt_contains: str | None = None

    def matches(self, conversation: Conversation) -> bool:
        """Return True if every condition of the rule holds for ``conversation``."""
        c = conversation
        return (
            (self.turn is None or self.turn == c.turn)
            and (self.step is None or self.step == c.step)
            and (self.result_contains is None or self.result_contains in c.last_tool_result)
            and (self.prompt_contains is None or self.prompt_contains in c.prompt)
        )


@dataclass(frozen=True)
class Script:
    """A named list of rules; the first rule that matches decides the answer.

    Attributes:
        name: The name used with ``--script``.
        rules: Tried in order.
        side_text: The answer to side calls (requests without tools).
        fail_for_seconds: If set, a server running this script answers 429 for this
            long after it starts, unless it was given its own window.
    """

    name: str
    rules: tuple[Rule, ...]
    side_text: str = "Scripted session"
    fail_for_seconds: float | None = None

    def decide(self, conversation: Conversation) -> Action:
        """Return the action for ``conversation``; a plain text if no rule matches."""
        if conversation.is_side_call:
            return Say(self.side_text)
        for rule in self.rules:
            if rule.matches(conversation):
                return rule.action
        return Say(
            f"script {self.name!r} has nothing for turn {conversation.turn} "
            f"step {conversation.step}."
        )


def decide(
    script: Script, conversation: Conversation, now_ms: int, fail_until_ms: int | None = None
) -> Action:
    """The answer to one request, the recovery window included.

    Args:
        script: The script to follow.
        conversation: What the request says.
        now_ms: The current time, epoch milliseconds.
        fail_until_ms: End of the recovery window, epoch milliseconds; before it,
            every request that offers tools gets a 429 whose reset fields name exactly
            this instant. None means no window.
    """
    if fail_until_ms is not None and now_ms < fail_until_ms and not conversation.is_side_call:
        return HttpError(ErrorKind.RATE_LIMIT, retry_after_seconds=(fail_until_ms - now_ms) / 1000)
    return script.decide(conversation)
