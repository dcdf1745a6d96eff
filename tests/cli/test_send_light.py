"""``send`` to a run its driver is running queues on plain JSON (``send_body``'s light
path) exactly what ``queue_message`` queues: the same answer, the same message file
and the same ``message_queued`` event, but for the message's id and moment."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from autopilot.cli import send_body
from autopilot.store.flock import FileLock
from tests.manage.runs import alive_driver, make_run, now_ms


def _sent(
    root: Path,
    text: str,
    light: bool,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    state: dict[str, Any],
) -> tuple[str, dict[str, Any], dict[str, Any]]:
    run_id = make_run(root, "project", now_ms(), state={**alive_driver(), **state})
    monkeypatch.setenv("AUTOPILOT_RUNS_DIR", str(root))
    taken: list[bool] = []
    queue = send_body._queued_for_its_driver

    def spy(folder: Path, text: str) -> bool:
        done = queue(folder, text) if light else False
        taken.append(done)
        return done

    monkeypatch.setattr(send_body, "_queued_for_its_driver", spy)
    driver = FileLock(root / run_id / "driver.lock")
    assert driver.acquire()
    try:
        capsys.readouterr()
        assert send_body.send(None, False, (run_id, text)) == 0
    finally:
        driver.release()
    assert taken == [light]
    said = re.sub(r"message \S+ queued", "message … queued", capsys.readouterr().out)
    said = said.replace(run_id, "RUN")
    (queued,) = (root / run_id / "inbox" / "new").iterdir()
    message = json.loads(queued.read_text())
    assert queued.name == message.pop("id") + ".json"
    assert isinstance(message.pop("queuedAt"), int)
    lines = (root / run_id / "events.jsonl").read_text().splitlines()
    event = json.loads(lines[-1])
    assert event["type"] == "message_queued"
    for moment in ("ts", "messageId", "runId"):
        event.pop(moment)
    return said, message, event


@pytest.mark.parametrize("text", ["a note for the next iteration", "ключ sk-ant-" + "x" * 40])
@pytest.mark.parametrize("state", [{}, {"cwd": "/nowhere/project"}])
def test_light_and_typed_send_queue_the_same(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    text: str,
    state: dict[str, Any],
) -> None:
    light = _sent(tmp_path / "light", text, True, monkeypatch, capsys, state)
    typed = _sent(tmp_path / "typed", text, False, monkeypatch, capsys, state)
    assert light == typed
    assert light[1]["text"] == text


def test_an_ended_run_is_left_to_the_typed_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """It can fail: a run that has ended is not queued by the light path."""
    run_id = make_run(tmp_path, "project", now_ms(), terminal=("abort", "user_stopped"))
    assert send_body._queued_for_its_driver(tmp_path / run_id, "late") is False
    assert not (tmp_path / run_id / "inbox").exists()
