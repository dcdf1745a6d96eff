"""A message's vocabulary and id, without the delivery model (``core.delivery``,
msgspec Structs): ``autopilot send`` to a run whose driver is alive queues its message
with these alone (``store.inbox``)."""

from __future__ import annotations

from enum import StrEnum

MAX_MESSAGE_CHARS = 100_000
"""A message's text is at most this many characters (it goes into a prompt)."""


class MessageSource(StrEnum):
    """Who a message is from; the JSON ``source`` of a message and its events."""

    USER = "user"
    DRIVER = "driver"


class MessageKind(StrEnum):
    """What a message is; the JSON ``kind`` of a message and its events."""

    MESSAGE = "message"
    ANSWER = "answer"
    BUDGET_WARNING = "budget_warning"
    REOPENED = "reopened"
    SUPERVISOR_NOTICE = "supervisor_notice"
    VERIFY_FAILED = "verify_failed"


def message_id(queued_at_ms: int, nonce_hex: str) -> str:
    """``<queuedAt ms, 13 digits>-<nonce>``: unique, and sorts by queue time.

    Raises:
        ValueError: ``nonce_hex`` is not 8 lowercase hex digits.
    """
    if len(nonce_hex) != 8 or any(ch not in "0123456789abcdef" for ch in nonce_hex):
        raise ValueError("the nonce must be 8 lowercase hex digits")
    return f"{queued_at_ms:013d}-{nonce_hex}"


def is_message_id(text: str) -> bool:
    """True for a well-formed message id (safe as a file name)."""
    stamp, _, nonce = text.partition("-")
    return (
        len(stamp) >= 13
        and stamp.isascii()
        and stamp.isdigit()
        and len(nonce) == 8
        and all(ch in "0123456789abcdef" for ch in nonce)
    )
