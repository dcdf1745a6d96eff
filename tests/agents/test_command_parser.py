"""The ``command`` agent's final message: the last paragraph of its plain-text output."""

from __future__ import annotations

from autopilot.agents.command import PlainTextParser
from autopilot.core.completion import promise_present


def _final(text: str) -> str | None:
    parser = PlainTextParser()
    for line in text.split("\n"):
        parser.feed(line)
    return parser.report().final_message


def test_the_last_paragraph_is_the_final_message() -> None:
    assert _final("working on it\n\nstill working\n\ndone. COMPLETE\n\n") == "done. COMPLETE"
    assert _final("working\n\n  done. COMPLETE  \n") == "  done. COMPLETE"
    assert _final("one\n   \ntwo") == "two"  # a line of spaces is blank
    assert _final("\n\n") is None


def test_a_blank_line_inside_a_fence_does_not_start_a_paragraph() -> None:
    text = "Example:\n```\nstep 1\n\nCOMPLETE\n```"
    assert _final(text) == text


def test_a_longer_fence_around_a_shorter_one() -> None:
    text = "````md\n```\n\nCOMPLETE\n```\n\nmore\n````"
    assert _final("intro\n\n" + text) == text
    # A shorter or other fence does not close it; a tilde fence follows its own.
    tilde = "~~~\n```\n\nCOMPLETE\n~~~"
    assert _final(tilde) == tilde


def test_a_paragraph_after_a_closed_fence() -> None:
    assert _final("```\ncode\n\nmore\n```\n\nAll done. COMPLETE") == "All done. COMPLETE"


def test_a_fence_opened_before_the_kept_tail_is_still_followed() -> None:
    # Only the last 400 lines are kept; the fence state comes from the whole output.
    lines = ["```", *(f"line {n}" for n in range(1000)), "", "COMPLETE", "```"]
    final = _final("\n".join(lines))
    assert final is not None and final.endswith("\n\nCOMPLETE\n```")
    assert final.startswith("line ")


def test_an_indented_code_block_stays_code() -> None:
    # The last paragraph is a four-space indented block: code, so never a claim.
    final = _final("Example:\n\n    COMPLETE\n")
    assert final == "    COMPLETE"
    assert not promise_present(final, "COMPLETE")
    assert promise_present(_final("Example:\n\nCOMPLETE\n"), "COMPLETE")
