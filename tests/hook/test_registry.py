"""The registry's entries: every field round-trips, a mistyped one is refused."""

from __future__ import annotations

import math

import pytest

from autopilot.core.vocabulary import HookAgent
from autopilot.store.hook_registry import Arming, CliProcess, from_json, to_json

FULL = Arming(
    "r-1800000000000",
    HookAgent.CODEX,
    "/work",
    session_id="s",
    claim_until_ms=5,
    block_streak=2,
    last_assistant_key="k",
    iteration_started_at_ms=7,
    input_tokens=100,
    output_tokens=10,
    tree_head="abc",
    tree_fingerprint="def",
    backlog=True,
    cost_usd=0.25,
    transcript_path="/t.jsonl",
    last_stop_at_ms=9,
    cli=CliProcess(42, 1.5, "codex exec"),
)


def test_every_field_round_trips() -> None:
    assert from_json(to_json(FULL)) == FULL
    assert from_json(to_json(Arming("r-1", HookAgent.CLAUDE, "/w"))) == Arming(
        "r-1", HookAgent.CLAUDE, "/w"
    )


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("costUsd", -1),
        ("costUsd", math.nan),
        ("costUsd", "0.1"),
        ("costUsd", True),
        ("transcriptPath", 3),
        ("lastStopAtMs", 1.5),
        ("lastStopAtMs", None),
    ],
)
def test_a_mistyped_field_refuses_the_entry(key: str, value: object) -> None:
    assert from_json({**to_json(FULL), key: value}) is None


@pytest.mark.parametrize(
    "cli", [None, [], {"pid": 0, "startTime": 1}, {"pid": True, "startTime": 1}, {"pid": 3}]
)
def test_a_cli_process_that_cannot_be_read_is_only_not_known(cli: object) -> None:
    arming = from_json({**to_json(FULL), "cli": cli})
    assert arming is not None and arming.cli is None


def test_an_entry_written_before_these_fields_reads() -> None:
    old = {
        k: v
        for k, v in to_json(FULL).items()
        if k not in ("costUsd", "transcriptPath", "lastStopAtMs", "cli")
    }
    arming = from_json(old)
    assert arming is not None
    assert (arming.cost_usd, arming.transcript_path, arming.last_stop_at_ms, arming.cli) == (
        None,
        None,
        0,
        None,
    )
