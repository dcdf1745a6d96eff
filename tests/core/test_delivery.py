"""The delivery contract as pure functions: order, hand-off, conclusion, repair."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from autopilot.core.delivery import (
    DeliveryLedger,
    Message,
    MessageKind,
    MessageSource,
    compose_prompt,
    conclude,
    forget_retired,
    is_message_id,
    message_id,
    ordered,
    plan_handoff,
    plan_repair,
    render,
)


def _msg(at: int, source: MessageSource = MessageSource.USER, text: str = "hi") -> Message:
    kind = MessageKind.MESSAGE if source is MessageSource.USER else MessageKind.BUDGET_WARNING
    return Message(message_id(at, f"{at % 2**32:08x}"), source, kind, text, at)


def test_user_messages_come_before_driver_notices_each_oldest_first() -> None:
    notice_early = _msg(1, MessageSource.DRIVER)
    user_late = _msg(5)
    user_early = _msg(3)
    notice_late = _msg(9, MessageSource.DRIVER)
    got = ordered([notice_late, user_late, notice_early, user_early])
    assert [m.queued_at_ms for m in got] == [3, 5, 1, 9]


def test_first_handoff_records_every_message_once() -> None:
    a, b = _msg(1), _msg(2)
    handoff = plan_handoff([b, a], DeliveryLedger(), iteration=4)
    assert handoff.messages == (a, b)
    assert handoff.to_record == (a.id, b.id)
    assert dict(handoff.ledger.handed) == {a.id: 4, b.id: 4}


def test_a_message_handed_to_a_crashed_attempt_is_handed_again_but_not_recorded_again() -> None:
    a = _msg(1)
    first = plan_handoff([a], DeliveryLedger(), iteration=2)
    # The attempt crashed: the ledger still says handed; a new message arrived meanwhile.
    b = _msg(7)
    again = plan_handoff([a, b], first.ledger, iteration=2)
    assert again.messages == (a, b)
    assert again.to_record == (b.id,)
    assert dict(again.ledger.handed) == {a.id: 2, b.id: 2}


def test_a_concluded_iteration_retires_its_messages_and_they_are_never_handed_again() -> None:
    a = _msg(1)
    handoff = plan_handoff([a], DeliveryLedger(), iteration=1)
    after = conclude(handoff.ledger, outcome_stands=True)
    assert after.handed == {} and after.retired == (a.id,)
    # A crash before the file moved: it is still in cur/, yet not handed again.
    assert plan_handoff([a], after, iteration=2).messages == ()
    assert plan_repair(after, [a.id], []).retire == (a.id,)
    assert forget_retired(after, [a.id]) == DeliveryLedger()


def test_a_retried_attempt_keeps_its_messages() -> None:
    a = _msg(1)
    handoff = plan_handoff([a], DeliveryLedger(), iteration=3)
    kept = conclude(handoff.ledger, outcome_stands=False)
    assert kept == handoff.ledger
    retry = plan_handoff([a], kept, iteration=3)
    assert retry.messages == (a,) and retry.to_record == ()


def test_repair_writes_the_delivery_record_a_crash_cut_off() -> None:
    a, b = _msg(1), _msg(2)
    ledger = plan_handoff([a, b], DeliveryLedger(), iteration=5).ledger
    repair = plan_repair(ledger, [a.id, b.id], recorded_ids=[a.id])
    assert repair.record == ((b.id, 5),)
    assert repair.retire == ()


def test_ledger_json_round_trip_and_bad_input_is_empty() -> None:
    ledger = DeliveryLedger({"0000000000001-0000abcd": 3}, ("0000000000002-0000abcd",))
    assert DeliveryLedger.from_json(ledger.to_json()) == ledger
    assert DeliveryLedger.from_json("nonsense") == DeliveryLedger()
    assert DeliveryLedger.from_json({"handed": {"x": "y", "z": True}, "retired": 3}) == (
        DeliveryLedger()
    )


def test_message_json_round_trip_and_validation() -> None:
    message = _msg(12, text="fix the tests\nplease")
    assert Message.from_json(message.to_json()) == message
    for bad in (
        None,
        {**message.to_json(), "id": "../../etc"},
        {**message.to_json(), "text": 3},
        {**message.to_json(), "queuedAt": True},
        {**message.to_json(), "source": "someone"},
        {**message.to_json(), "kind": "shout"},
    ):
        with pytest.raises(ValueError):
            Message.from_json(bad)


def test_message_ids_sort_by_time_and_are_safe_file_names() -> None:
    assert message_id(5, "0000000a") < message_id(40, "00000000")
    assert is_message_id(message_id(1_700_000_000_000, "deadbeef"))
    for bad in ("", "abc", "0000000000001-XYZ", "0000000000001-0000abcd/..", "1-0000abcd"):
        assert not is_message_id(bad)
    with pytest.raises(ValueError):
        message_id(1, "xyz")


def test_render_says_who_each_message_is_from() -> None:
    text = render([_msg(60_000, MessageSource.DRIVER, "80% of the cost budget is spent"), _msg(0)])
    assert text.index("Message from the user (1970-01-01 00:00 UTC)") < text.index(
        "Budget notice from autopilot (1970-01-01 00:01 UTC)"
    )
    assert render([]) == ""
    assert compose_prompt("base", []) == "base"
    assert compose_prompt("base\n", [_msg(0, text="x")]).startswith("base\n\n---\n\n## Messages")


@given(
    st.lists(
        st.tuples(st.integers(0, 10**6), st.sampled_from(list(MessageSource))),
        max_size=12,
        unique_by=lambda t: t[0],
    ),
    st.lists(st.booleans(), min_size=1, max_size=6),
)
def test_every_message_reaches_exactly_one_concluded_iteration(
    sends: list[tuple[int, MessageSource]], stands: list[bool]
) -> None:
    """Whatever mix of retried and concluded attempts, each message taken before the
    last concluded attempt reaches exactly one concluded iteration, recorded once."""
    messages = [_msg(at, source) for at, source in sends]
    ledger = DeliveryLedger()
    cur: dict[str, Message] = {}  # inbox/cur
    recorded: list[str] = []
    concluded_in: dict[str, list[int]] = {}
    iteration = 1
    for index, outcome_stands in enumerate([*stands, True]):
        # Messages arrive spread over the attempts and are claimed into cur/.
        for n, m in enumerate(messages):
            if n % (len(stands) + 1) == index:
                cur[m.id] = m
        handoff = plan_handoff(cur.values(), ledger, iteration)
        recorded.extend(handoff.to_record)
        if outcome_stands:
            for m in handoff.messages:
                concluded_in.setdefault(m.id, []).append(iteration)
        ledger = conclude(handoff.ledger, outcome_stands=outcome_stands)
        moved = [i for i in ledger.retired if cur.pop(i, None) is not None]
        ledger = forget_retired(ledger, moved)
        if outcome_stands:
            iteration += 1
    assert sorted(recorded) == sorted(m.id for m in messages)
    assert all(len(its) == 1 for its in concluded_in.values())
    assert set(concluded_in) == {m.id for m in messages}
    assert cur == {} and ledger == DeliveryLedger()


def test_a_budget_is_warned_of_once_when_80_percent_is_crossed() -> None:
    from autopilot.core.delivery import budget_warnings

    limits = {"cost_usd": 10.0, "tokens": None}
    [notice] = budget_warnings({"cost_usd": 7.0}, {"cost_usd": 8.5}, limits)
    assert notice.startswith("85% of the cost budget is spent (8.50 of 10 USD)")
    assert budget_warnings({"cost_usd": 8.5}, {"cost_usd": 9.0}, limits) == ()  # already
    assert budget_warnings({"cost_usd": 1.0}, {"cost_usd": 2.0}, limits) == ()
    assert budget_warnings({"cost_usd": 7.0}, {"cost_usd": 10.0}, limits) == ()  # reached
    tokens = budget_warnings({"tokens": 0}, {"tokens": 900}, {"tokens": 1000})
    assert tokens and "900 of 1000 tokens" in tokens[0]
