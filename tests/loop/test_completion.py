"""The completion promise (GitHub issues snarktank/ralph#76, frankbria/ralph-claude-code#88)."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autopilot.core.completion import explicit_not_done, promise_present
from autopilot.core.vocabulary import MatchMode

PROMPT = """Work through prd.json story by story.
Reminder: when every story passes, reply with <promise>COMPLETE</promise>
"""

# -- sentence (the default) ------------------------------------------------------------

MENTIONS = [
    # Each of these completed a run under the former default and must not.
    "Almost COMPLETE; 3 tests still fail.",
    "Phase 1: COMPLETE\nPhase 2: IN PROGRESS",
    "Step 1 of 5 COMPLETE. Moving on…",
    "✅ Task 1 COMPLETE ⏳ Task 2 pending",
    "Partially COMPLETE…",
    "TODO: make the build COMPLETE",
    "COMPLETE is what I'll say tomorrow, not today.",
    "| Story | State |\n|-------|-------|\n| 1 | COMPLETE |\n| 2 | open |",
    "Story | State\n--- | ---\n1 | open\nCOMPLETE",  # a row without pipes is still a row
    "| COMPLETE |",
    "<!-- COMPLETE -->",
    "<!--\nCOMPLETE\n-->",
    "Notes <!-- COMPLETE --> follow.",
    "«COMPLETE»",
    "„COMPLETE“",
    "« COMPLETE »",
    "‚COMPLETE‘",
    "“COMPLETE”",
    "‘COMPLETE’",
    '"COMPLETE"',
    "'COMPLETE'",
    "「COMPLETE」",
    '"All stories pass.\nCOMPLETE"',  # a quote spanning two lines
    "“Everything is green,\nCOMPLETE”",
    "> The reviewer wrote:\nCOMPLETE",  # a lazy continuation of the quote
    "> COMPLETE",
    "Example:\n\n    COMPLETE",  # an indented code block
    "\tCOMPLETE",
    "````\n```\n```\nCOMPLETE\n````",  # a longer fence around a shorter one
    "```\nstep 1\n\nCOMPLETE\n```",  # a blank line inside a fence
    "~~~\nCOMPLETE\n```\n~~~x",
    "```python\nprint('x')\n\nCOMPLETE",  # an unclosed fence runs to the end
    "Use `COMPLETE` only when done.",
    "``COMPLETE``",
    'The prompt says to print "COMPLETE" at the end.',
    # Questions, negations, instructions, statuses.
    "Is it COMPLETE?",
    "COMPLETE?",
    "**COMPLETE?**",
    "The work is not COMPLETE.",
    "COMPLETE: false",
    "Status: COMPLETE",
    "I will reply with <promise>COMPLETE</promise> once all stories pass.",
    "Reminder: when every story passes, reply with <promise>COMPLETE</promise>",
    "Is it <promise>COMPLETE</promise>?",
    # A line that carries a sentence on into the token, or the token into the next.
    "Phase 1:\nCOMPLETE",
    "I am not saying\nCOMPLETE",
    "When every story passes, write\nCOMPLETE",
    "COMPLETE\nis what I'll say tomorrow.",
    "COMPLETE\n(except story 7)",
    # List items and headings describe their own item.
    "- COMPLETE",
    "1. COMPLETE",
    "* Done. COMPLETE",
    "## COMPLETE",
    "~~COMPLETE~~",
    "COMPLETE ✅",
    "COMPLETE…",
    # Not the token as a word.
    "INCOMPLETE",
    "COMPLETED the first story",
    "The task is complete.",
    "",
]


@pytest.mark.parametrize("message", MENTIONS)
def test_a_mention_is_not_a_claim(message: str) -> None:
    assert promise_present(message, "COMPLETE", prompt=PROMPT) is False


CLAIMS = [
    "COMPLETE",
    "COMPLETE.",
    "COMPLETE!",
    "**COMPLETE**",
    "*COMPLETE*",
    "__COMPLETE__",
    "**COMPLETE.**",
    "**COMPLETE**.",
    "Done. COMPLETE",
    "done. COMPLETE",
    "All 12 stories pass! COMPLETE.",
    "**Done. COMPLETE**",
    "Are the tests green? Yes. COMPLETE",
    "All stories pass.\n\n<promise>COMPLETE</promise>",
    "All stories pass: <promise>COMPLETE</promise>",
    "<promise>COMPLETE</promise>",
    "All stories pass and the build is green.\nCOMPLETE",
    "Summary:\n- fixed the parser\n- added tests\n\nCOMPLETE",
    "Summary:\n- fixed the parser\n- added tests\nCOMPLETE",
    "  COMPLETE  ",
    "```\nCOMPLETE\n```\nAll done.\nCOMPLETE",
    'I wrote "tests pass" in the log.\n\nCOMPLETE',
    "I'll stop here. COMPLETE",
    "COMPLETE\n\nSummary of the work: three stories.",
    "| a | b |\n|---|---|\n| 1 | 2 |\n\nCOMPLETE",
    "<!-- note -->\nCOMPLETE",
    "> a quote\n\nCOMPLETE",
]


@pytest.mark.parametrize("message", CLAIMS)
def test_a_claim_counts(message: str) -> None:
    assert promise_present(message, "COMPLETE", prompt=PROMPT) is True


def test_a_bare_claim_that_is_also_a_line_of_the_prompt_counts() -> None:
    prompt = "When every story passes, end your answer with this line:\nCOMPLETE\n"
    assert promise_present("All stories pass.\nCOMPLETE", "COMPLETE", prompt=prompt) is True
    assert promise_present("<promise>COMPLETE</promise>", "COMPLETE", prompt=PROMPT) is True
    # A whole line of the prompt repeated is still an echo.
    echoed = "Reminder: when every story passes, reply with <promise>COMPLETE</promise>"
    assert promise_present(echoed, "COMPLETE", prompt=PROMPT) is False
    done = "Done. COMPLETE"
    assert promise_present(done, "COMPLETE", prompt=f"Example:\n{done}\n") is False


def test_custom_token_with_underscore() -> None:
    assert promise_present("LOOP_COMPLETE", "LOOP_COMPLETE") is True
    assert promise_present("_LOOP_COMPLETE_", "LOOP_COMPLETE") is True
    assert promise_present("LOOP_COMPLETE", "COMPLETE") is False


def test_no_token_or_message_never_matches() -> None:
    assert promise_present(None, "COMPLETE") is False
    assert promise_present("COMPLETE", None) is False
    assert promise_present("COMPLETE", "") is False


def test_a_later_question_does_not_undo_an_earlier_token() -> None:
    assert promise_present("All stories pass. COMPLETE\nAnything else?", "COMPLETE") is True


def test_huge_messages_of_quote_marks_and_backticks_stay_linear() -> None:
    # Each unclosed mark looks ahead once (bisect), not to the end of the paragraph.
    message = " 'a" * 200_000 + " `x" * 200_000 + "\n\nCOMPLETE"
    assert promise_present(message, "COMPLETE") is True


# -- the former rule and the other modes ----------------------------------------------

WORD_CASES = [
    ("done. COMPLETE", True),
    ("COMPLETE", True),
    ("Result: COMPLETE", True),
    ("Everything is finished — COMPLETE", True),
    ("Phase 1: COMPLETE", True),  # word mode is the looser rule
    ("**COMPLETE**", True),
    ("Reminder: when every story passes, reply with <promise>COMPLETE</promise>", False),
    ("I will reply with <promise>COMPLETE</promise> once all stories pass.", False),
    ("When everything passes I should say COMPLETE.", False),
    ("If the tests pass, output COMPLETE", False),
    ("I am not outputting COMPLETE yet: 4 stories fail.", False),
    ("The work is not COMPLETE.", False),
    ("COMPLETE is not warranted yet", False),
    ("I can't say COMPLETE until story 7 passes", False),
    ('The prompt says to print "COMPLETE" at the end.', False),
    ("Use `COMPLETE` only when done.", False),
    ("```\necho COMPLETE\n```", False),
    ("> COMPLETE", False),
    # Code, quotes, tables and comments are not prose in word mode either.
    ("````\n```\n```\nCOMPLETE\n````", False),
    ("| 1 | COMPLETE |", False),
    ("<!-- COMPLETE -->", False),
    ("«COMPLETE»", False),
    ("INCOMPLETE", False),
    ("COMPLETED the first story", False),
    ("PRE-COMPLETE-CHECK passed", False),
    ("", False),
]


@pytest.mark.parametrize(("message", "expected"), WORD_CASES)
def test_word_mode(message: str, expected: bool) -> None:
    assert promise_present(message, "COMPLETE", mode=MatchMode.WORD, prompt=PROMPT) is expected


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ("COMPLETE", False),  # tag mode: a bare word never counts
        ("done. COMPLETE", False),
        ("done. <promise>COMPLETE</promise>", True),
        ("I will emit <promise>COMPLETE</promise> later", False),
        ("```\n<promise>COMPLETE</promise>\n```", False),
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


# -- properties ------------------------------------------------------------------------

TOKENS = st.sampled_from(["COMPLETE", "DONE", "LOOP_COMPLETE", "ABORT_NO_IMPROVEMENTS", "X9"])
WORDS = st.sampled_from(
    ["all", "stories", "pass", "Phase", "1", "the", "build", "Task", "almost", "now", "tests"]
)
PROSE = st.lists(WORDS, min_size=1, max_size=6).map(" ".join)
"""Words that never hold a token: prose around a mention."""

SENTENCE_END = st.sampled_from(["", ".", "!"])


@st.composite
def mentions(draw: st.DrawFn, token: str) -> str:
    """A message that mentions ``token`` without claiming it."""
    before = draw(PROSE)
    after = draw(PROSE)
    kind = draw(st.integers(0, 13))
    if kind == 0:  # one word of a longer sentence
        return f"{before} {token} {after}{draw(SENTENCE_END)}"
    if kind == 1:
        return f"{before}{draw(st.sampled_from([':', ',', ' —', ' -', ';']))} {token}"
    if kind == 2:
        return f"{token} {after}{draw(SENTENCE_END)}"
    if kind == 3:  # asked
        return f"{draw(st.sampled_from(['', 'Is it ', 'Are we ']))}{token}?"
    if kind == 4:  # quoted, any style, possibly across lines
        opener, closer = draw(
            st.sampled_from(['""', "''", "“”", "‘’", "„“", "‚‘", "«»", "»«", "「」"])
        )
        inner = draw(st.sampled_from([token, f"{before}.\n{token}", f"{token}\n{after}"]))
        return f"{opener}{inner}{closer}"
    if kind == 5:  # fenced, possibly with a blank line and a shorter fence inside
        fence = draw(st.sampled_from(["```", "````", "~~~"]))
        inner = draw(st.sampled_from([token, f"{before}\n\n{token}", f"```\n```\n{token}"]))
        return f"{fence}\n{inner}\n{fence}"
    if kind == 6:
        return f"{before}.\n\n    {token}"  # indented code
    if kind == 7:
        return f"> {before}\n{draw(st.sampled_from(['> ', '']))}{token}"
    if kind == 8:
        return f"| {before} | state |\n|---|---|\n| {token} | {after} |"
    if kind == 9:
        return f"<!-- {token} -->" if draw(st.booleans()) else f"<!--\n{token}\n-->"
    if kind == 10:  # negated or conditional, across a line break
        lead = draw(st.sampled_from(["I am not saying", "when done, write", "it is not yet"]))
        return f"{before}. {lead}\n{token}"
    if kind == 11:
        return f"{draw(st.sampled_from(['- ', '* ', '1. ', '## ']))}{token}"
    if kind == 12:
        return f"`{token}`"
    return f"{token}\nand {after.lower()}"  # the token's sentence carries on


@st.composite
def claims(draw: st.DrawFn, token: str) -> str:
    """A message whose last paragraph claims ``token`` as a sentence of its own."""
    emphasis = draw(st.sampled_from(["", "*", "**", "_", "__"]))
    bare = f"{emphasis}{token}{draw(SENTENCE_END)}{emphasis}"
    kind = draw(st.integers(0, 3))
    if kind == 0:
        return bare
    if kind == 1:
        return f"All {draw(PROSE)}{draw(st.sampled_from(['.', '!']))} {bare}"
    if kind == 2:
        return f"{draw(PROSE)}.\n{bare}"
    return f"{draw(PROSE)} {draw(PROSE)}\n\n<promise>{token}</promise>"


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_no_mention_is_a_claim(data: st.DataObject) -> None:
    token = data.draw(TOKENS)
    mentioned = data.draw(st.lists(mentions(token), min_size=1, max_size=3))
    message = "\n\n".join(mentioned)
    assert promise_present(message, token) is False
    assert promise_present(message, token, prompt=message) is False


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_a_claim_counts_after_any_mentions(data: st.DataObject) -> None:
    token = data.draw(TOKENS)
    mentioned = data.draw(st.lists(mentions(token), max_size=3))
    claim = data.draw(claims(token))
    message = "\n\n".join([*mentioned, claim])
    assert promise_present(message, token) is True
    # In word mode every claim is also a whole word; the tag mode needs the tag.
    assert promise_present(message, token, mode=MatchMode.WORD) is True
    tagged = bool(re.search(rf"<promise>{token}</promise>\Z", claim))
    assert promise_present(claim, token, mode=MatchMode.TAG) is tagged


def test_an_echoed_prompt_line_with_quotes_is_still_an_echo() -> None:
    prompt = 'Fix "the parser" first; all green: <promise>COMPLETE</promise>\n'
    echoed = 'Fix "the parser" first; all green: <promise>COMPLETE</promise>'
    assert promise_present(echoed, "COMPLETE", prompt=prompt) is False
    assert promise_present(echoed, "COMPLETE") is True


BAKED = """How to end your final message:
- After a committed improvement, end normally; the next iteration looks for the next one.
- When a goal given in the focus is fully met and verified, end with this line alone:
COMPLETE
- When nothing worth improving is left within the focus, end with this line alone:
ABORT_NO_IMPROVEMENTS
Write those words on a line of their own only when you mean them.
"""


def test_a_prompt_that_asks_for_the_token_alone_on_a_line() -> None:
    # The agent's own bare line is a claim although the prompt holds the same line…
    for token in ("COMPLETE", "ABORT_NO_IMPROVEMENTS"):
        assert promise_present(f"Verified.\n\n{token}", token, prompt=BAKED) is True
    # …and the instructions repeated are not.
    for token in ("COMPLETE", "ABORT_NO_IMPROVEMENTS"):
        assert promise_present(BAKED, token, prompt=BAKED) is False
        assert promise_present(f"I read:\n\n{BAKED}", token) is False
