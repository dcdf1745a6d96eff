"""The inbox and the driver's delivery: durable on send, claimed by rename, delivered
exactly once across kill -9 at every point of an attempt."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from autopilot.config import RunConfig
from autopilot.core.delivery import DeliveryLedger, MessageKind, MessageSource
from autopilot.errors import UsageError
from autopilot.loop.arming import arm_run
from autopilot.loop.clock import SystemClock
from autopilot.loop.delivery import Delivery
from autopilot.loop.messages import pending_messages, queue_message
from autopilot.store import inbox as inbox_module
from autopilot.store.events import EventLog, EventType
from autopilot.store.inbox import Inbox
from autopilot.store.run_state import PromptSource
from autopilot.store.state import StateStore
from tests.conftest import REPO_ROOT, read_jsonl
from tests.runtime.delivery_sim import POINTS


@pytest.fixture
def run_folder(tmp_path: Path, repo: Path) -> Path:
    root = tmp_path / "runs"
    root.mkdir()
    run_id = arm_run(root, RunConfig(), PromptSource(text="work"), repo, SystemClock())
    return root / run_id


def _events(folder: Path, kind: str) -> list[dict[str, Any]]:
    return [e for e in read_jsonl(folder / "events.jsonl") if e["type"] == kind]


def _sim(*args: str) -> int:
    done = subprocess.run(
        [sys.executable, "-m", "tests.runtime.delivery_sim", *args],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode in (0, -9), done.stderr
    return done.returncode


def test_send_is_durable_with_one_queued_event_whatever_the_run_is_doing(
    run_folder: Path,
) -> None:
    message = queue_message(run_folder, "use the new API", SystemClock())
    assert (run_folder / "inbox" / "new" / f"{message.id}.json").is_file()
    [queued] = _events(run_folder, "message_queued")
    assert queued["messageId"] == message.id
    assert (queued["source"], queued["kind"], queued["excerpt"]) == (
        "user",
        "message",
        "use the new API",
    )
    assert queued["autopilotOn"] is True
    assert [m.text for m in pending_messages(run_folder)] == ["use the new API"]


def test_messages_queued_while_off_say_so(run_folder: Path, repo: Path) -> None:
    (repo / ".autopilot").mkdir()
    (repo / ".autopilot" / "OFF").write_text("")
    queue_message(run_folder, "hello", SystemClock())
    assert _events(run_folder, "message_queued")[0]["autopilotOn"] is False


def test_an_ended_run_takes_no_message_and_bad_text_is_refused(run_folder: Path) -> None:
    with pytest.raises(UsageError, match="empty"):
        queue_message(run_folder, "  \n", SystemClock())
    with pytest.raises(UsageError, match="characters long"):
        queue_message(run_folder, "x" * 100_001, SystemClock())
    StateStore(run_folder / "state.json").update(lambda s: setattr(s, "terminated", True))
    with pytest.raises(UsageError, match="already ended"):
        queue_message(run_folder, "too late", SystemClock())
    assert not _events(run_folder, "message_queued")


def test_user_messages_go_before_driver_notices_in_the_prompt(run_folder: Path, repo: Path) -> None:
    clock = SystemClock()
    log = EventLog(run_folder / "events.jsonl", run_folder.name, clock.now_ms)
    delivery = Delivery(run_folder, log, repo, clock)
    delivery.notice(MessageKind.BUDGET_WARNING, "80% of --max-cost is spent")
    queue_message(run_folder, "stop refactoring, fix the bug", clock)
    prompt, handoff = delivery.deliver("BASE", DeliveryLedger(), 1)
    assert prompt.startswith("BASE\n")
    assert prompt.index("fix the bug") < prompt.index("80% of --max-cost")
    assert [m.source for m in handoff.messages] == [MessageSource.USER, MessageSource.DRIVER]
    # Claimed by rename: nothing is left queued, both are taken.
    assert Inbox(run_folder).pending() == ()
    assert len(Inbox(run_folder).taken()) == 2


@pytest.mark.parametrize("crash_at", POINTS)
def test_kill_9_at_each_point_of_an_attempt_delivers_each_message_exactly_once(
    run_folder: Path, repo: Path, crash_at: str
) -> None:
    clock = SystemClock()
    first = queue_message(run_folder, "before the crash", clock)
    assert _sim(str(run_folder), str(repo), crash_at) == -9
    second = queue_message(run_folder, "while the driver is dead", clock)
    assert _sim(str(run_folder), str(repo), "") == 0
    assert _sim(str(run_folder), str(repo), "") == 0  # nothing left: an empty hand-off

    ids = {first.id, second.id}
    delivered = _events(run_folder, "message_delivered")
    assert sorted(e["messageId"] for e in delivered) == sorted(ids)  # once each
    queued = _events(run_folder, "message_queued")
    assert sorted(e["messageId"] for e in queued) == sorted(ids)
    concluded = read_jsonl(run_folder / "concluded.jsonl")
    reached = [i for row in concluded for i in row["ids"]]
    assert sorted(reached) == sorted(ids)  # each reached exactly one concluded iteration
    # What the agent was handed, attempt by attempt: never a message after its iteration.
    received = [json.loads(p.read_text()) for p in sorted((run_folder / "received").iterdir())]
    for message_id in ids:
        its = {r["iteration"] for r in received if message_id in r["ids"]}
        assert len(its) == 1, (message_id, received)
    inbox = Inbox(run_folder)
    assert inbox.pending() == () and inbox.taken() == ()
    done = sorted(p.stem for p in (run_folder / "inbox" / "done").iterdir())
    assert done == sorted(ids)
    state = StateStore(run_folder / "state.json").read()
    assert state.delivery == DeliveryLedger()


@pytest.mark.parametrize("crash_at", ["before_record", "after_record"])
def test_a_sender_killed_mid_send_leaves_a_message_the_driver_adopts_once(
    run_folder: Path, repo: Path, crash_at: str
) -> None:
    assert _sim("send", str(run_folder), "half-sent", crash_at) == -9
    assert Inbox(run_folder).pending() == ()  # not yet visible: it is in tmp/
    clock = SystemClock()
    log = EventLog(run_folder / "events.jsonl", run_folder.name, clock.now_ms)
    _, handoff = Delivery(run_folder, log, repo, clock).deliver("BASE", DeliveryLedger(), 1)
    assert [m.text for m in handoff.messages] == ["half-sent"]
    queued = _events(run_folder, "message_queued")
    assert len(queued) == 1
    assert queued[0].get("recovered") is (True if crash_at == "before_record" else None)


def test_a_torn_or_foreign_file_is_put_aside(run_folder: Path, repo: Path) -> None:
    inbox = Inbox(run_folder)
    queue_message(run_folder, "good", SystemClock())
    (run_folder / "inbox" / "tmp" / "0000000000001-0000abcd.json").write_bytes(b'{"id": "00')
    (run_folder / "inbox" / "new" / "0000000000002-0000abcd.json").write_bytes(b"[1, 2]")
    clock = SystemClock()
    log = EventLog(run_folder / "events.jsonl", run_folder.name, clock.now_ms)
    _, handoff = Delivery(run_folder, log, repo, clock).deliver("BASE", DeliveryLedger(), 1)
    assert [m.text for m in handoff.messages] == ["good"]
    assert sorted(p.name for p in (run_folder / "inbox" / "bad").iterdir()) == [
        "0000000000001-0000abcd.json",
        "0000000000002-0000abcd.json",
    ]
    assert len(inbox.taken()) == 1


_SENDER = """
import sys
from pathlib import Path
from autopilot.loop.clock import SystemClock
from autopilot.loop.messages import queue_message
for n in range(5):
    queue_message(Path(sys.argv[1]), f"{sys.argv[2]}-{n}", SystemClock())
"""


def test_concurrent_senders_and_a_claiming_driver_lose_and_double_nothing(
    run_folder: Path, repo: Path
) -> None:
    senders = [
        subprocess.Popen([sys.executable, "-c", _SENDER, str(run_folder), f"s{k}"], cwd=REPO_ROOT)
        for k in range(8)
    ]
    clock = SystemClock()
    log = EventLog(run_folder / "events.jsonl", run_folder.name, clock.now_ms)
    delivery = Delivery(run_folder, log, repo, clock)
    seen: list[str] = []
    ledger = DeliveryLedger()
    iteration = 1
    while True:
        running = any(p.poll() is None for p in senders)
        _, handoff = delivery.deliver("BASE", ledger, iteration)
        delivery.handed(handoff, iteration)
        seen.extend(m.text for m in handoff.messages if m.id in handoff.to_record)
        ledger = delivery.retire(
            DeliveryLedger({}, tuple(handoff.ledger.handed))  # concluded
        )
        iteration += 1
        if not running:
            break
    assert all(p.wait() == 0 for p in senders)
    expected = sorted(f"s{k}-{n}" for k in range(8) for n in range(5))
    assert sorted(seen) == expected
    assert len(_events(run_folder, "message_queued")) == 40
    assert len(_events(run_folder, "message_delivered")) == 40


def test_a_message_delivered_to_the_running_iteration_is_no_longer_pending(
    run_folder: Path,
) -> None:
    message = queue_message(run_folder, "use the new API", SystemClock())
    Inbox(run_folder).claim(lambda _: None, set)
    # Taken for the iteration, not yet handed over: still waiting.
    assert [m.id for m in pending_messages(run_folder)] == [message.id]
    log = EventLog(run_folder / "events.jsonl", run_folder.name, SystemClock().now_ms)
    log.emit(EventType.MESSAGE_DELIVERED, messageId=message.id, iteration=1)
    log.close()
    assert pending_messages(run_folder) == ()


def test_an_empty_inbox_is_claimed_without_its_lock_and_a_queued_message_with_it(
    run_folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    inbox = Inbox(run_folder)
    assert inbox.claim(lambda m: None, set) == ()  # makes the folders
    locked: list[Path] = []
    real = inbox_module.holding

    def holding(path: Path, **kwargs: Any) -> Any:
        locked.append(path)
        return real(path, **kwargs)

    monkeypatch.setattr(inbox_module, "holding", holding)
    assert inbox.claim(lambda m: None, set) == ()
    assert locked == []
    queue_message(run_folder, "hello", SystemClock())
    locked.clear()
    assert [m.text for m in inbox.claim(lambda m: None, set)] == ["hello"]
    assert locked
