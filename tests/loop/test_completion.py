"""The completion promise: field reports 1 and 2, SPEC §7.2."""

from __future__ import annotations

import pytest

from autopilot.loop.completion import MatchMode, explicit_not_done, promise_present

PROMPT = """Work through prd.json story by story.
Reminder: when every story passes, reply with <promise>COMPLETE</promise>
"""

WORD_CASES = [
    # (final message, expected)
    ("done. COMPLETE", True),
    ("COMPLETE", True),  # variant A: the bare word, own line
    ("All stories pass.\n\n<promise>COMPLETE</promise>", True),
    ("Result: COMPLETE", True),
    ("Everything is finished — COMPLETE", True),
    ("**COMPLETE**", True),
    # The restated instruction (field report 1): an echo of our own prompt line.
    ("Reminder: when every story passes, reply with <promise>COMPLETE</promise>", False),
    # Conditional / instructional sentences never count, echoed or not.
    ("I will reply with <promise>COMPLETE</promise> once all stories pass.", False),
    ("When everything passes I should say COMPLETE.", False),
    ("If the tests pass, output COMPLETE", False),
    # Negation (variant B).
    ("I am not outputting COMPLETE yet: 4 stories fail.", False),
    ("The work is not COMPLETE.", False),
    ("COMPLETE is not warranted yet", False),
    ("I can't say COMPLETE until story 7 passes", False),
    # Quotes and code.
    ('The prompt says to print "COMPLETE" at the end.', False),
    ("Use `COMPLETE` only when done.", False),
    ("```\necho COMPLETE\n```", False),
    ("> COMPLETE", False),
    # Not the token standing as a token.
    ("INCOMPLETE", False),
    ("COMPLETED the first story", False),
    ("The task is complete.", False),
    ("PRE-COMPLETE-CHECK passed", False),
    ("", False),
]


@pytest.mark.parametrize(("message", "expected"), WORD_CASES)
def test_word_mode(message: str, expected: bool) -> None:
    assert promise_present(message, "COMPLETE", prompt=PROMPT) is expected


def test_fence_then_real_token_counts() -> None:
    message = "```\nCOMPLETE\n```\nAll done.\nCOMPLETE"
    assert promise_present(message, "COMPLETE") is True


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ("COMPLETE", False),  # tag mode: a bare word never counts
        ("done. COMPLETE", False),
        ("done. <promise>COMPLETE</promise>", True),
        ("I will emit <promise>COMPLETE</promise> later", False),
    ],
)
def test_tag_mode(message: str, expected: bool) -> None:
    assert promise_present(message, "COMPLETE", mode=MatchMode.TAG) is expected


@pytest.mark.parametrize(
    ("message", "expected"),
    [("LOOP_COMPLETE", True), ("xxCOMPLETExx", True), ("not COMPLETE", False)],
)
def test_substring_mode(message: str, expected: bool) -> None:
    assert promise_present(message, "COMPLETE", mode=MatchMode.SUBSTRING) is expected


def test_custom_token_with_underscore() -> None:
    assert promise_present("LOOP_COMPLETE", "LOOP_COMPLETE") is True
    assert promise_present("LOOP_COMPLETE", "COMPLETE") is False


def test_no_token_or_message_never_matches() -> None:
    assert promise_present(None, "COMPLETE") is False
    assert promise_present("COMPLETE", None) is False
    assert promise_present("COMPLETE", "") is False


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        (
            "---RALPH_STATUS---\nSTATUS: IN_PROGRESS\nEXIT_SIGNAL: false\n---END_RALPH_STATUS---",
            True,
        ),
        ("EXIT_SIGNAL: false", True),
        ("STATUS: COMPLETE\nEXIT_SIGNAL: true", False),
        ("all done, COMPLETE", False),
    ],
)
def test_explicit_not_done(message: str, expected: bool) -> None:
    assert explicit_not_done(message) is expected


@pytest.mark.parametrize(
    "message",
    ["Is it COMPLETE?", "Nothing is COMPLETE yet.", "COMPLETE: false", "Are we COMPLETE? Not yet."],
)
def test_questions_and_explicit_false_do_not_count(message: str) -> None:
    assert promise_present(message, "COMPLETE") is False


def test_a_later_question_does_not_undo_an_earlier_token() -> None:
    assert promise_present("All stories pass. COMPLETE\nAnything else?", "COMPLETE") is True
