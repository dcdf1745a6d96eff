"""Well-known secret shapes are redacted; ordinary text is left alone."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from autopilot.agents.base import shorten
from autopilot.core.redact import MARK, has_secret_shape, redact, redact_value
from autopilot.core.text import MAX_EXCERPT_UTF16_UNITS, excerpt
from autopilot.store.events import serialize_event

ANTHROPIC = "sk-ant-api03-" + "Ab3_" * 20
OPENAI = "sk-proj-" + "Zx9-" * 12
GITHUB = "ghp_" + "a1B2" * 9
GITHUB_OAUTH = "gho_" + "Q7w8" * 9
GITHUB_PAT = "github_pat_11ABCDEFG0" + "x" * 60
AWS = "AKIAIOSFODNN7EXAMPLE"
SLACK = "xoxb-123456789012-1234567890123-" + "a" * 24
GOOGLE = "AIza" + "S" * 35
STRIPE = "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc"
JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
PRIVATE_KEY = (
    "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7v1x\nq2Zl+abc/def==\n"
    "-----END RSA PRIVATE KEY-----"
)

SECRETS = [ANTHROPIC, OPENAI, GITHUB, GITHUB_OAUTH, GITHUB_PAT, AWS, SLACK, GOOGLE, STRIPE, JWT]


@pytest.mark.parametrize("secret", SECRETS)
def test_each_shape_is_redacted_in_running_text(secret: str) -> None:
    text = f"export KEY_FROM_ENV={secret} # found in .env\nthen used {secret}."
    out = redact(text)
    assert secret not in out
    assert out.count(MARK) >= 2
    assert out.endswith(".")  # what follows the secret is kept


def test_prefixes_stay_so_a_reader_knows_what_was_there() -> None:
    assert redact(f"key {ANTHROPIC} here") == f"key sk-ant-{MARK} here"
    assert redact(f"key {GITHUB} here") == f"key ghp_{MARK} here"
    assert redact(f"id {AWS}.") == f"id AKIA{MARK}."
    assert redact(f"{SLACK}") == f"xoxb-{MARK}"


def test_bearer_tokens_and_url_passwords() -> None:
    out = redact(
        "curl -H 'Authorization: Bearer abc123def456ghi' https://bob:hunter22@example.com/x"
    )
    assert out == f"curl -H 'Authorization: Bearer {MARK}' https://bob:{MARK}@example.com/x"
    # Prose about bearer authentication is not a token.
    assert redact("use Bearer authentication here") == "use Bearer authentication here"


def test_private_key_blocks_whole_or_cut() -> None:
    out = redact(f"key:\n{PRIVATE_KEY}\nend")
    assert "MIIEow" not in out and out.endswith("\nend")
    assert "-----BEGIN RSA PRIVATE KEY-----" + MARK in out
    cut = redact("begins -----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA")
    assert "b3BlbnNz" not in cut


def test_secret_named_assignments() -> None:
    out = redact(
        'AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCY and "api_key": "p4ssw0rd-123"'
    )
    assert "wJalrXUtnFEMI" not in out and "p4ssw0rd" not in out
    assert redact("max_tokens=100000, password: short") == "max_tokens=100000, password: short"


@pytest.mark.parametrize(
    "text",
    [
        "task-abcdefghijklmnopqrstuvwxyz0123 is a branch name",
        "the disk-0123456789abcdefghijkl volume",
        "git checkout ghp-branch",
        "Phase 1: COMPLETE",
        "/home/dev/work/src/login.py",
        "tokens 1200 in / 300 out",
    ],
)
def test_ordinary_text_is_left_alone(text: str) -> None:
    assert redact(text) == text
    assert not has_secret_shape(text)


def test_redact_value_walks_json_values() -> None:
    value = {"note": f"saw {GITHUB}", "items": [AWS, 3], "keep": GITHUB}
    out = redact_value(value, skip=lambda key: key == "keep")
    assert out == {"note": f"saw ghp_{MARK}", "items": [f"AKIA{MARK}", 3], "keep": GITHUB}


@given(st.text(), st.sampled_from(SECRETS))
def test_redaction_is_idempotent_and_removes_the_secret(prefix: str, secret: str) -> None:
    text = f"{prefix} {secret} "
    once = redact(text)
    assert redact(once) == once
    assert secret not in once


BEARER = "Bearer abc123def456ghi789"


@pytest.mark.parametrize("secret", [*SECRETS, BEARER, PRIVATE_KEY])
def test_a_secret_straddling_the_cut_leaves_no_part_behind(secret: str) -> None:
    """Whichever character of the secret the cut falls on, what is left after the
    text before it is a prefix of the redacted secret: redacting the cut text would
    no longer see the secret's shape, so redaction comes first."""
    tail = " and more"
    redacted = redact(secret + tail)
    assert secret[len(secret) // 2 :] not in redacted
    for at in range(1, len(secret)):
        padding = "w" * (MAX_EXCERPT_UTF16_UNITS - at - 1) + " "
        cut = excerpt(padding + secret + tail)
        assert cut.startswith(padding) and redacted.startswith(cut[len(padding) :]), at
        line = serialize_event(
            {"type": "warning", "ts": 1, "runId": "r", "note": padding + secret + tail}
        )
        assert line is not None
        note = json.loads(line)["note"]
        assert note.startswith(padding) and redacted.startswith(note[len(padding) :]), at
        lead = "w" * 149 + " "
        short = shorten(lead + secret + tail, len(lead) + at)
        flat = " ".join(redacted.split())
        assert short.startswith(lead) and flat.startswith(short[len(lead) :].rstrip("…")), at


_FRAGMENTS = [
    *SECRETS,
    "password: hunter2hunter2",
    "paſſword=hunter2hunter2",  # U+017F: a case-insensitive pattern takes it for "s"
    "SECRET_\u212aEY=abcdefgh1234",  # U+212A KELVIN SIGN, taken for "k"
    "CREDENT\u0130AL=abcdefgh1234",  # U+0130, taken for "i"
    "credent\u0131al: abcdefgh1234",  # U+0131, taken for "i"
    "Authorization: BEARER abc123def456",
    "https://user:pa55word@example.com/x",
    "ß ẞ İ ı ſ K µ",
    " ",
    "\n",
]


@given(st.lists(st.sampled_from(_FRAGMENTS) | st.text(max_size=8), max_size=6))
def test_the_quick_check_never_skips_a_secret(parts: list[str]) -> None:
    from autopilot.core.redact import LONG_TEXT_CHARS, _redact_all

    text = "".join(parts)
    assert redact(text) == _redact_all(text)
    long = text + " " * LONG_TEXT_CHARS  # matched by substring searches, not one scan
    assert redact(long) == _redact_all(long)


@given(
    st.lists(
        st.lists(st.sampled_from(_FRAGMENTS) | st.text(max_size=8) | st.from_regex(r"\d{1,13}"))
        .map("".join)
        .map(lambda value: value + "-1796000000000"),
        max_size=8,
    )
)
def test_the_check_of_many_values_never_skips_a_secret_in_one(values: list[str]) -> None:
    """``may_hold_secret_in`` looks at the values without their digits, each distinct
    rest once: a value ``redact`` changes still makes it answer True."""
    from autopilot.core.redact import _redact_all, may_hold_secret_in

    if any(_redact_all(value) != value for value in values):
        assert may_hold_secret_in(values)


def test_run_ids_that_differ_only_in_their_start_time_hold_no_secret() -> None:
    from autopilot.core.redact import may_hold_secret_in

    run_ids = [f"proj{n % 7}-{1796000000000 + n}" for n in range(10_000)]
    assert not may_hold_secret_in([*run_ids, "7", "∞", "completed (completion_promise)"])
    assert may_hold_secret_in([*run_ids, "sk-" + "ab1" * 10 + "-1796000000000"])
    assert may_hold_secret_in([*run_ids, "token-1796000000000"])


def test_a_text_seen_before_is_redacted_as_the_first_time() -> None:
    """Short texts are remembered once redacted (a driver's events repeat them): the
    second answer is the first one, secret or not, and a full memory starts afresh."""
    secret = "key: sk-ant-" + "a" * 40
    assert redact(secret) == redact(secret) == "key: sk-ant-[REDACTED]"
    assert redact("iteration_end") == redact("iteration_end") == "iteration_end"
    for number in range(5000):  # more than it keeps
        assert redact(f"plain {number}") == f"plain {number}"
        assert redact(f"sk-ant-{number:012d}xyz") == "sk-ant-[REDACTED]"
    assert redact(secret) == "key: sk-ant-[REDACTED]"
    long_secret = "x" * 300 + " sk-ant-" + "b" * 40
    assert redact(long_secret) == redact(long_secret) == "x" * 300 + " sk-ant-[REDACTED]"
