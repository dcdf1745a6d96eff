"""What the driver tells an agent beyond its base prompt, and when (``docs/architecture.md``,
"Messages to the agent").

Every message — a user's ``autopilot send``, an answer to a gate, a budget warning, a
reopened item's notice, a supervisor notice — takes the same path, decided here and
carried out by the driver with ``store.inbox``::

    queued ──claim──▶ taken ──hand-off──▶ handed ──the attempt's outcome stands──▶ retired
    inbox/new         inbox/cur           ledger: message_delivered written        inbox/done
                                            │
                                            └─ a crash, or a retried attempt: handed
                                               again to the next attempt, with no
                                               second message_delivered

* A message is never dropped: it stays queued while no attempt can take it (a run
  paused, waiting, switched OFF or with its daemon dead), and it stays handed until an
  attempt that received it is concluded and its outcome stands.
* ``message_delivered`` is written at hand-off — once the agent process that received it
  has started — never at the attempt: a message whose hand-off did not happen (a crash
  before the spawn) is handed at the next boundary, and recorded then.
* A message reaches one iteration: once an iteration that received it is concluded, it
  is retired; the ledger that says so is written in the same ``state.json`` write that
  concludes the iteration, so no crash can hand it to a second one.
* A user's own messages come before driver notices, each group oldest first.

Everything here is pure; the ledger is the ``delivery`` object of ``state.json``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from msgspec import Struct, field

from autopilot.core.message_ids import (  # here too, where the delivery model is used
    MAX_MESSAGE_CHARS,
    MessageKind,
    MessageSource,
    is_message_id,
    message_id,
)

__all__ = [
    "BUDGET_WARNING_FRACTION",
    "MAX_MESSAGE_CHARS",
    "DeliveryLedger",
    "Handoff",
    "Message",
    "MessageKind",
    "MessageSource",
    "Repair",
    "budget_warnings",
    "compose_prompt",
    "conclude",
    "forget_retired",
    "is_message_id",
    "message_id",
    "ordered",
    "plan_handoff",
    "plan_repair",
    "render",
]

TYPE_CHECKING = False  # as typing's, without importing typing at run time
if TYPE_CHECKING:
    from typing import Any

_HEADINGS = {
    MessageKind.MESSAGE: "Message from the user",
    MessageKind.ANSWER: "The user's answer to your question",
    MessageKind.BUDGET_WARNING: "Budget notice from autopilot",
    MessageKind.REOPENED: "Work item reopened (notice from autopilot)",
    MessageKind.SUPERVISOR_NOTICE: "Notice from autopilot's supervisor",
    MessageKind.VERIFY_FAILED: "Verify commands failed (notice from autopilot)",
}


class Message(Struct, frozen=True):
    """One message for the agent.

    Attributes:
        id: Unique within the run; sorts in the order messages were queued
            (``<queuedAt ms, 13 digits>-<8 hex>``).
        source: Who sent it.
        kind: What it is.
        text: The text the agent is given (at most ``MAX_MESSAGE_CHARS``).
        queued_at_ms: When it was queued, epoch ms.
    """

    id: str
    source: MessageSource
    kind: MessageKind
    text: str
    queued_at_ms: int

    def to_json(self) -> dict[str, Any]:
        """The message file's JSON object (``<run>/inbox/``'s files)."""
        return {
            "id": self.id,
            "source": self.source.value,
            "kind": self.kind.value,
            "text": self.text,
            "queuedAt": self.queued_at_ms,
        }

    @classmethod
    def from_json(cls, data: Any) -> Message:
        """Parse ``to_json`` output.

        Raises:
            ValueError: not an object of that shape (a field missing, of the wrong
                type, or out of range).
        """
        if not isinstance(data, Mapping):
            raise ValueError("a message must be a JSON object")
        ident, text, queued = data.get("id"), data.get("text"), data.get("queuedAt")
        if not isinstance(ident, str) or not ident or not is_message_id(ident):
            raise ValueError("a message needs a well-formed 'id'")
        if not isinstance(text, str) or len(text) > MAX_MESSAGE_CHARS:
            raise ValueError("a message needs a 'text' string within the size limit")
        if isinstance(queued, bool) or not isinstance(queued, int) or queued < 0:
            raise ValueError("a message needs an integer 'queuedAt'")
        return cls(
            id=ident,
            source=MessageSource(str(data.get("source"))),
            kind=MessageKind(str(data.get("kind"))),
            text=text,
            queued_at_ms=queued,
        )


def ordered(messages: Iterable[Message]) -> tuple[Message, ...]:
    """Messages in the order the agent reads them: the user's first, then the
    driver's notices; each group oldest first (ties by id)."""
    rank = {MessageSource.USER: 0, MessageSource.DRIVER: 1}
    return tuple(sorted(messages, key=lambda m: (rank[m.source], m.queued_at_ms, m.id)))


class DeliveryLedger(Struct, frozen=True):
    """The ``delivery`` object of ``state.json``: where taken messages stand.

    Attributes:
        handed: Message id → the iteration it was first handed to, for messages
            handed to an attempt whose outcome does not stand yet (it is running, it
            crashed, or it is retried). Their ``message_delivered`` is written.
        retired: Ids of messages whose iteration was concluded, kept until their files
            have moved out of ``inbox/cur``.
    """

    handed: Mapping[str, int] = field(default_factory=dict)
    retired: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """For ``state.json``."""
        return {"handed": dict(self.handed), "retired": list(self.retired)}

    @classmethod
    def from_json(cls, data: Any) -> DeliveryLedger:
        """Parse ``to_json`` output; a missing or malformed part counts as empty."""
        if not isinstance(data, Mapping):
            return cls()
        handed_raw = data.get("handed")
        handed = (
            {
                key: value
                for key, value in handed_raw.items()
                if isinstance(key, str)
                and isinstance(value, int)
                and not isinstance(value, bool)
                and value >= 0
            }
            if isinstance(handed_raw, Mapping)
            else {}
        )
        retired_raw = data.get("retired")
        retired = (
            tuple(item for item in retired_raw if isinstance(item, str))
            if isinstance(retired_raw, list)
            else ()
        )
        return cls(handed, retired)


class Handoff(Struct, frozen=True):
    """What one attempt is given.

    Attributes:
        messages: Everything handed to this attempt, in prompt order.
        to_record: The ids whose ``message_delivered`` is written now (their first
            hand-off), in prompt order; a message handed again after a crash is not
            recorded twice.
        ledger: The ledger to write together with the attempt's start (after its
            agent process started), before the ``message_delivered`` events.
    """

    messages: tuple[Message, ...]
    to_record: tuple[str, ...]
    ledger: DeliveryLedger


def plan_handoff(taken: Iterable[Message], ledger: DeliveryLedger, iteration: int) -> Handoff:
    """Decide what the attempt of ``iteration`` is given.

    Args:
        taken: The messages in ``inbox/cur`` (claimed by the driver).
        ledger: The ledger as ``state.json`` holds it now.
        iteration: The iteration the attempt belongs to.

    Returns:
        Every taken message that is not retired — those handed to an earlier attempt
        that did not stand, and those taken since — in prompt order.
    """
    retired = set(ledger.retired)
    messages = ordered(m for m in taken if m.id not in retired)
    handed = dict(ledger.handed)
    to_record = tuple(m.id for m in messages if m.id not in handed)
    for ident in to_record:
        handed[ident] = iteration
    return Handoff(messages, to_record, DeliveryLedger(handed, ledger.retired))


def conclude(ledger: DeliveryLedger, *, outcome_stands: bool) -> DeliveryLedger:
    """The ledger to write with an attempt's conclusion.

    Args:
        ledger: The ledger of the attempt being concluded.
        outcome_stands: The iteration is over (its outcome counts); False when the
            same iteration is tried again (a usage limit, a failed resume), so its
            messages are handed to the retry.

    Returns:
        With ``outcome_stands``, every handed message retired; otherwise unchanged.
    """
    if not outcome_stands or not ledger.handed:
        return ledger
    retired = tuple(dict.fromkeys([*ledger.retired, *ledger.handed]))
    return DeliveryLedger({}, retired)


def forget_retired(ledger: DeliveryLedger, moved: Iterable[str]) -> DeliveryLedger:
    """The ledger once the files of ``moved`` have left ``inbox/cur``."""
    gone = set(moved)
    return DeliveryLedger(ledger.handed, tuple(i for i in ledger.retired if i not in gone))


class Repair(Struct, frozen=True):
    """What a starting driver fixes before its first hand-off.

    Attributes:
        retire: Ids whose files are still in ``inbox/cur`` though their iteration
            was concluded (a crash before the files moved): move them to ``done``.
        record: Handed ids with no ``message_delivered`` in the log (a crash between
            the ledger write and the event), each with its iteration: write them now.
    """

    retire: tuple[str, ...]
    record: tuple[tuple[str, int], ...]


def plan_repair(
    ledger: DeliveryLedger, taken_ids: Iterable[str], recorded_ids: Iterable[str]
) -> Repair:
    """Reconcile the ledger, the files in ``inbox/cur`` and the log after a restart.

    Args:
        ledger: The ledger in ``state.json``.
        taken_ids: The ids of the files in ``inbox/cur``.
        recorded_ids: The ids the log has a ``message_delivered`` for.
    """
    taken = set(taken_ids)
    recorded = set(recorded_ids)
    retire = tuple(i for i in ledger.retired if i in taken)
    record = tuple(
        (ident, iteration) for ident, iteration in ledger.handed.items() if ident not in recorded
    )
    return Repair(retire, record)


def render(messages: Iterable[Message]) -> str:
    """The section appended to the prompt for ``messages`` ("" when there are none).

    Each message gets a heading saying who it is from and when it was queued (UTC),
    so the agent can tell a user's words from a driver notice.
    """
    import datetime as _dt  # only where messages are shown with their times

    parts = []
    for message in ordered(messages):
        when = _dt.datetime.fromtimestamp(message.queued_at_ms / 1000, tz=_dt.UTC)
        heading = f"{_HEADINGS[message.kind]} ({when:%Y-%m-%d %H:%M} UTC)"
        parts.append(f"### {heading}\n\n{message.text.strip()}")
    if not parts:
        return ""
    intro = (
        "## Messages for you (delivered by autopilot)\n\n"
        "Read these before you go on; a message from the user takes precedence over "
        "the task above where they disagree."
    )
    return "\n\n".join([intro, *parts])


def compose_prompt(
    base_prompt: str, messages: Iterable[Message], standing: Iterable[str] = ()
) -> str:
    """``base_prompt``, then each standing section (e.g. the memory file's paragraph),
    then the messages section if there are messages; separated by rules."""
    sections = [text.strip() for text in standing if text.strip()]
    section = render(messages)
    if section:
        sections.append(section)
    if not sections:
        return base_prompt
    return base_prompt.rstrip() + "".join(f"\n\n---\n\n{text}" for text in sections) + "\n"


BUDGET_WARNING_FRACTION = 0.8
"""A spend budget this far used is worth a notice to the agent."""


def budget_warnings(
    before: Mapping[str, float], after: Mapping[str, float], limits: Mapping[str, float | None]
) -> tuple[str, ...]:
    """Notices for the budgets this iteration took past ``BUDGET_WARNING_FRACTION``.

    Args:
        before: Spend before the iteration, by budget name (``cost_usd``, ``tokens``).
        after: Spend after it.
        limits: The budgets (None: no such budget).

    Returns:
        One notice per budget crossed now (a budget is warned of once: when crossed).
    """
    words = {"cost_usd": ("the cost budget", "USD"), "tokens": ("the token budget", "tokens")}
    notices = []
    for name, limit in limits.items():
        if not limit or name not in words:
            continue
        mark = BUDGET_WARNING_FRACTION * limit
        spent_before, spent = before.get(name, 0.0), after.get(name, 0.0)
        if spent_before < mark <= spent < limit:
            what, unit = words[name]
            shown = (
                f"{spent:.2f} of {limit:g} {unit}"
                if unit == "USD"
                else f"{spent:.0f} of {limit:g} {unit}"
            )
            notices.append(
                f"{round(100 * spent / limit)}% of {what} is spent ({shown}). Finish what you "
                "are doing and leave the work in a state that a later run can pick up."
            )
    return tuple(notices)
