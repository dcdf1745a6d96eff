"""Secrets in text: well-known credential shapes, found and replaced (pure).

An agent prints what it sees — an ``.env`` file it read, a ``curl -H
"Authorization: Bearer …"`` it ran — and autopilot keeps excerpts of that in
``events.jsonl`` and ``state.json`` and shows them in ``status`` and the views.
``redact`` replaces each well-known secret shape with its public prefix and
``[REDACTED]``, so what autopilot writes or shows never carries the secret; the
raw output files under ``iter-NNNN/`` keep the agent's bytes (they are 0600).

Shapes, as their issuers document them:

* Anthropic ``sk-ant-…``; OpenAI and OpenAI-compatible ``sk-…`` (``sk-proj-…``);
* GitHub ``ghp_``/``gho_``/``ghu_``/``ghs_``/``ghr_…`` and ``github_pat_…``;
  GitLab ``glpat-…``;
* AWS access key ids ``AKIA…``/``ASIA…`` (16 more upper-case letters or digits);
* Slack ``xoxa-``/``xoxb-``/``xoxp-``/``xoxr-``/``xoxs-…`` and ``xapp-…``;
* Google API keys ``AIza…``; Stripe secret and restricted keys ``sk_live_…``,
  ``rk_live_…`` (and ``_test_``); npm ``npm_…``; Hugging Face ``hf_…``;
* JSON Web Tokens ``eyJ….eyJ….…``;
* PEM and PGP private-key blocks (``-----BEGIN … PRIVATE KEY-----`` to its end
  line, or to the end of the text when it was cut);
* ``Bearer <token>`` (a token with a digit in it, so prose is left alone);
* a password in a URL (``https://user:password@host``);
* an assignment to a secret-named variable (``AWS_SECRET_ACCESS_KEY=…``,
  ``password: …``) of 8 or more characters.

``redact`` is idempotent: redacting redacted text changes nothing.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

TYPE_CHECKING = False  # as typing's, without importing typing at run time
if TYPE_CHECKING:
    from typing import Any

MARK = "[REDACTED]"
"""What a secret is replaced with (after its public prefix)."""

_START = r"(?<![A-Za-z0-9_-])"
"""A secret's prefix starts a token: ``task-abc…`` holds no ``sk-`` key."""

_END = r"(?![A-Za-z0-9])"

_PRIVATE_KEY_PATTERN = (
    r"-----BEGIN ([A-Z0-9 ]*?)PRIVATE KEY((?: BLOCK)?)-----"
    r".*?(?:-----END \1PRIVATE KEY\2-----|\Z)"
)

_PREFIXED_PATTERNS = (
    _START + r"(sk-ant-)[A-Za-z0-9_-]{12,}",
    _START + r"(sk-)(?!ant-)[A-Za-z0-9_-]{20,}",
    _START + r"(gh[pousr]_)[A-Za-z0-9]{30,}",
    _START + r"(github_pat_)[A-Za-z0-9_]{30,}",
    _START + r"(glpat-)[A-Za-z0-9_-]{20,}",
    _START + r"(AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}" + _END,
    _START + r"(xox[aboprs]-|xapp-)[A-Za-z0-9-]{10,}",
    _START + r"(AIza)[0-9A-Za-z_-]{35}",
    _START + r"((?:sk|rk)_(?:live|test)_)[A-Za-z0-9]{16,}",
    _START + r"(npm_)[A-Za-z0-9]{36}",
    _START + r"(hf_)[A-Za-z0-9]{30,}",
    _START + r"(eyJ)[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",
    r"(?i:\b(bearer)\s+)(?=[A-Za-z0-9._~+/-]*[0-9])[A-Za-z0-9._~+/-]{8,}=*",
)
"""Each keeps group 1 (the public prefix) and replaces the rest."""

_URL_PASSWORD_PATTERN = r"(://[^/\s:@]+:)[^/\s@]+@"

_ASSIGNMENT_PATTERN = (
    r"((?<=[A-Z0-9])_KEY|(?i:api[_-]?key|secret|token|password|passwd|credentials?))"
    r"([\"']?\s*[=:]\s*[\"']?)(?!\[REDACTED\])[^\s\"',;]{8,}"
)
"""``NAME=value`` / ``name: value`` where the name says it holds a secret
(``*_KEY`` in capitals, as environment variables are named; ``*api_key``,
``*secret``, ``*token``, ``*password`` in any case). A value already redacted is left
alone, with what follows it (``?token=[REDACTED]&format=json``)."""

_compiled: tuple[re.Pattern[str], ...] = ()
"""The patterns above, compiled on first use (text that passes ``_QUICK``): compiling
them costs a command that shows nothing secret-like more than its output does."""


def _patterns() -> tuple[re.Pattern[str], ...]:
    """The private-key pattern, the prefixed ones, the URL password, the assignment
    (two threads may both compile them; either result is kept whole)."""
    global _compiled  # noqa: PLW0603 - a cache set once
    if not _compiled:
        _compiled = (
            re.compile(_PRIVATE_KEY_PATTERN, re.DOTALL),
            *map(re.compile, _PREFIXED_PATTERNS),
            re.compile(_URL_PASSWORD_PATTERN),
            re.compile(_ASSIGNMENT_PATTERN),
        )
    return _compiled


def _keep_prefix(match: re.Match[str]) -> str:
    prefix = match.group(1)
    if prefix.lower() == "bearer":
        return f"{prefix} {MARK}"
    return prefix + MARK


def _private_key(match: re.Match[str]) -> str:
    kind, block = match.group(1), match.group(2)
    return f"-----BEGIN {kind}PRIVATE KEY{block}-----{MARK}-----END {kind}PRIVATE KEY{block}-----"


_QUICK = (
    r"sk-|gh[pousr]_|github_pat_|glpat-|A[KSBC][IC]A|xox|xapp-|AIza|k_live_|k_test_|npm_|hf_"
    r"|eyJ|PRIVATE KEY|(?i:bearer|://)"
    r"|(?i:key|secret|token|passw(?:or)?d|credentials?)[\"']?\s*[=:]"
)
"""Text without any of these holds no secret shape: the common case costs one scan
(compiled on first use, ``_quick``: ``list`` looks by ``_QUICK_WORDS`` alone). A
secret-named word counts only where an assignment follows it, as in
``_ASSIGNMENT_PATTERN``: ``tokens`` and ``maxTokens: 5`` are not looked at closer."""

_quick_compiled: list[re.Pattern[str]] = []


def _quick() -> re.Pattern[str]:
    """``_QUICK``, compiled once (two threads may both compile it; either is kept)."""
    if not _quick_compiled:
        _quick_compiled.append(re.compile(_QUICK))
    return _quick_compiled[0]


_QUICK_WORDS = (
    *("sk-", "github_pat_", "glpat-", "xox", "xapp-", "aiza", "k_live_", "k_test_", "npm_"),
    *("hf_", "eyj", "private key", "bearer", "://", "key", "secret", "token", "passw"),
    "credential",
    *(f"gh{letter}_" for letter in "pousr"),
    *(f"a{second}{third}a" for second in "ksbc" for third in "ic"),
)
"""``_QUICK``'s alternatives in lower case, for long text: a few substring searches
over a whole ``list`` of 10,000 runs are far faster than one scan with as many
alternatives (which is faster for the short strings of an event)."""

LONG_TEXT_CHARS = 4096
"""From this length on, ``_QUICK_WORDS`` rather than ``_QUICK`` decides."""


def _may_hold_secret(text: str) -> bool:
    """False only when no pattern above can match ``text``. Long text is matched in
    lower case (a case-sensitive pattern's match is one too). A case-insensitive
    pattern also takes four letters outside ASCII for ASCII ones: U+212A (``k``,
    which ``lower`` makes ``k``), U+017F (``s``), U+0130 and U+0131 (``i``); text
    holding one of the last three is case-folded, with them made ``s`` and ``i``."""
    if len(text) < LONG_TEXT_CHARS:
        return _quick().search(text) is not None
    return _holds_a_quick_word(text)


def _holds_a_quick_word(text: str) -> bool:
    """``_may_hold_secret`` of text of any length by ``_QUICK_WORDS`` (its way for
    long text)."""
    if text.isascii() or not any(letter in text for letter in _UNLOWERED):
        folded = text.lower()
    else:
        folded = _folded(text)
    return any(word in folded for word in _QUICK_WORDS)


_UNLOWERED = ("\u017f", "\u0130", "\u0131")
"""The letters a case-insensitive pattern takes for ``s`` or ``i`` that ``lower``
does not make ``s`` or ``i`` alone."""


def may_hold_secret_in(values: Iterable[str]) -> bool:
    """False only when no pattern can match any one of ``values`` (``redact`` of
    each leaves it as it is): ``_holds_a_quick_word`` of them together, the ASCII
    ones without their digits (no word of ``_QUICK`` or ``_QUICK_WORDS`` holds one, so
    none is lost), each distinct rest once: ten thousand run ids that differ only in
    their start time (``list``) are a few labels to look through."""
    values = list(values)
    plain = list(filter(str.isascii, values))
    if len(plain) != len(values):
        others = [value for value in values if not value.isascii()]
        if _holds_a_quick_word("\0".join(others)):
            return True
    digitless = "\0".join(plain).encode("ascii").translate(None, b"0123456789")
    return _holds_a_quick_word("\0".join(set(digitless.decode("ascii").split("\0"))))


def _folded(text: str) -> str:
    return text.casefold().replace("\u0131", "i").replace("i\u0307", "i")


def redact(text: str) -> str:
    """``text`` with every well-known secret shape replaced (see the module docstring).

    Args:
        text: Any text: an excerpt, a note, an error message, an output line.

    Returns:
        The text with each secret's value replaced by ``[REDACTED]`` after its
        public prefix (``sk-ant-[REDACTED]``, ``Bearer [REDACTED]``).
    """
    if not text:
        return text
    known = _redacted.get(text)
    if known is not None:
        return known
    shown = _redact_all(text) if _may_hold_secret(text) else text
    if len(text) <= _MEMO_CHARS:
        if len(_redacted) >= _MEMO_ENTRIES:
            _redacted.clear()
        _redacted[text] = shown
    return shown


_MEMO_CHARS = 256
_MEMO_ENTRIES = 4096
_redacted: dict[str, str] = {}
"""Short texts already redacted, and what they became (at most ``_MEMO_ENTRIES``; all
forgotten at once when full): the keys and most values of every event a driver writes
repeat (its type, run id, HEAD, the field names), and a dictionary look-up costs far
less than a scan of them."""


def _redact_all(text: str) -> str:
    """Every pattern applied to ``text`` (``redact`` without its quick check)."""
    private_key, *prefixed, url_password, assignment = _patterns()
    text = private_key.sub(_private_key, text)
    for pattern in prefixed:
        text = pattern.sub(_keep_prefix, text)
    text = url_password.sub(lambda m: m.group(1) + MARK + "@", text)
    return assignment.sub(lambda m: m.group(1) + m.group(2) + MARK, text)


def redact_value(value: Any, *, skip: Callable[[str], bool] | None = None) -> Any:
    """``redact`` applied to every string in a JSON-like value, dict keys included.

    Args:
        value: A str, list, dict, or anything else (returned as it is).
        skip: Top-level dict keys whose values are left as they are.

    Returns:
        A copy with redacted strings (the value itself when nothing changed).
    """
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, list):
        return [redact_value(item) for item in value]
    if isinstance(value, dict):
        return {
            redact(key) if isinstance(key, str) else key: (
                item if skip is not None and skip(key) else redact_value(item)
            )
            for key, item in value.items()
        }
    return value


def has_secret_shape(text: str) -> bool:
    """True when ``text`` holds a well-known secret shape."""
    return redact(text) != text
