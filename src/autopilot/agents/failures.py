"""Why an agent's iteration failed, from the agent's own words.

Pure functions shared by every adapter:

* ``classify_error_text`` maps an agent's *own* error words to an ``ErrorKind``.
  Adapters pass it only text the CLI printed as an error: a structured error or
  result event, or stderr after the process failed. Never tool output, file
  contents or the model's prose (a review that discusses rate limits is no limit),
  and every pattern has word boundaries or is a CLI's own phrase: ``rate limiting``,
  ``@upstash/ratelimit``, ``rateLimit`` and ``respect the 5-hour limit`` match
  nothing. An HTTP status in the text outranks words (``401 … exceeded your current
  quota`` is an auth failure).
* ``conclude`` turns a parser's report and the exit status into a ``Classification``
  and records the verdict (kind, the agent's words, the reset time) on the report.

Reset times are parsed by ``limits``.
"""

from __future__ import annotations

import re
from datetime import datetime

from autopilot.agents.base import Classification, IterationReport, shorten
from autopilot.agents.limits import parse_reset_time
from autopilot.core.vocabulary import ErrorKind

LIMIT_KINDS = frozenset({ErrorKind.RATE_LIMIT, ErrorKind.USAGE_LIMIT})
"""Error kinds that make the loop wait and retry the same iteration."""

_I = re.IGNORECASE


def _any(*patterns: str) -> re.Pattern[str]:
    return re.compile("|".join(f"(?:{p})" for p in patterns), _I)


# Error codes some providers put in the text; they decide between the two limits.
_USAGE_CODE = _any(r"\busage_limit_reached\b", r"\binsufficient_quota\b", r"\bquota_exceeded\b")
_RATE_CODE = _any(r"\brate_limit_exceeded\b", r"\brate_limit_error\b")
_USAGE = _any(
    r"\busage[ _]limit\b",
    r"\byou(?:'|’)?ve hit your (?:[\w-]+ )?limit\b",
    r"\b(?:weekly|daily|monthly|session|5-hour|five[ _-]hour|seven[ _-]day|opus|sonnet) limit "
    r"(?:reached|exceeded|hit)\b",
    r"\bquota exceeded\b",
    r"\bcheck your plan and billing\b",
    r"\bcredit balance is too low\b",
    r"\bbilling[ _]error\b",
    r"\bbudget ?exceeded\b",
    r"\bTerminalQuotaError\b",
    r"\bdaily quota\b",
    r"\buser_weekly_rate_limited\b",
    r"\bout of extra usage\b",
)
_RATE = _any(
    r"\brate[ _-]limit(?:ed|s)?\b",
    r"\btoo many requests\b",
    r"\bRESOURCE_EXHAUSTED\b",
    r"\bRetryableQuotaError\b",
    r"\bthrottled\b",
)
_AUTH = _any(
    r"\bunauthori[sz]ed\b",
    r"\bUNAUTHENTICATED\b",
    r"\bauthentication[ _](?:failed|error)\b",
    r"\bfailed to authenticate\b",
    r"\binvalid[ _]api[ _]key\b",
    r"\bnot logged in\b",
    r"\bnot able to authenticate\b",
    r"\bplease run /login\b",
    r"\binvalid auth method\b",
)
_SERVER = _any(
    r"\binternal server error\b",
    r"\bserver[ _]error\b",
    r"\boverloaded\b",
    r"\bhigh demand\b",
    r"\bservice unavailable\b",
    r"\bbad gateway\b",
    r"\bgateway timeout\b",
    r"\bservers are down\b",
)
_NETWORK = _any(
    r"\bECONNREFUSED\b",
    r"\bECONNRESET\b",
    r"\bENOTFOUND\b",
    r"\bEAI_AGAIN\b",
    r"\bETIMEDOUT\b",
    r"\bconnection (?:refused|reset|error|failed)\b",
    r"\bunable to connect\b",
    r"\berror sending request\b",
    r"\bwaiting for network\b",
    r"\bnetwork is unreachable\b",
    r"\bfetch failed\b",
    r"\bAPIConnectionError\b",
    r"^\W{0,3}reconnecting\.\.\.",
)
_INVALID = _any(
    r"\bmodel[ _]not[ _]found\b",
    r"\bnot_found_error\b",
    r"\bunknown model\b",
)
_SESSION_NOT_FOUND = _any(
    r"\bno conversation found with session id\b",
    r"\bno session found matching\b",
    r"\bsession not found\b",
    r"\bno (?:saved )?(?:session|rollout|thread) found\b",
    r"\bthread not found\b",
)

_STATUS = (
    re.compile(r"^\W{0,3}(\d{3})\s", _I),
    re.compile(r"\bstatus(?:[ _]?code)?\W{0,3}(\d{3})\b", _I),
    re.compile(r"\bHTTP(?:/\d(?:\.\d)?)?\s?(\d{3})\b", _I),
    re.compile(r"[\"']code[\"']\s*:\s*(\d{3})\b", _I),
    re.compile(r"\b(?:API Error|error):?\s*(\d{3})\b", _I),
    re.compile(r"\brejected \((\d{3})\)", _I),
    re.compile(
        r"\b(\d{3}) (?:Too Many Requests|Unauthorized|Forbidden|Internal Server Error|"
        r"Bad Gateway|Service Unavailable|Gateway Timeout|Not Found|Bad Request)\b",
        _I,
    ),
)


_PAYMENT = _any(
    r"\bcredit balance is too low\b",
    r"\bbilling[ _]error\b",
    r"\binsufficient_quota\b",
    r"\bcheck your plan and billing\b",
    r"\bpayment required\b",
    r"\bout of extra usage\b",
)


def needs_payment(text: str | None) -> bool:
    """The agent's error says the account is out of credit: waiting will not help,
    a person must act (a billing error, not a limit that resets)."""
    return bool(text) and _PAYMENT.search(text or "") is not None


def status_from_text(text: str) -> int | None:
    """The HTTP status (400-599) an error message names, if any.

    Args:
        text: An agent's own error message, e.g. ``429 fake rate_limit_exceeded: …``
            (pi), ``unexpected status 401 Unauthorized: …`` (Codex), ``{"code":500,…}``
            (Gemini) or ``API Error: Request rejected (429)`` (Claude).

    Returns:
        The status code, or None when the text names none.
    """
    for pattern in _STATUS:
        for match in pattern.finditer(text):
            code = int(match.group(1))
            if 400 <= code <= 599:
                return code
    return None


def kind_for_status(status: int, text: str = "") -> ErrorKind:
    """The error kind an HTTP status means; ``text`` tells a usage limit from a 429."""
    if status in (401, 403, 407):
        return ErrorKind.AUTH
    if status == 429:
        return _limit_kind(text) or ErrorKind.RATE_LIMIT
    if status < 500 and (status == 402 or _limit_kind(text) is ErrorKind.USAGE_LIMIT):
        # A plan's usage credit refused with a 400 (pi: ``400 … You're out of extra
        # usage``) or a 402 is a usage limit, not a bad request.
        return ErrorKind.USAGE_LIMIT
    if status >= 500:
        return ErrorKind.SERVER
    if status == 404 and _SESSION_NOT_FOUND.search(text):
        return ErrorKind.SESSION_NOT_FOUND
    if status == 408:
        return ErrorKind.NETWORK
    return ErrorKind.INVALID_REQUEST


_LIMIT_PATTERNS = (
    # An explicit error code decides; a rate-limit code wins when a body carries both
    # (the fake server's 429s say ``"type":"insufficient_quota","code":"rate_limit_exceeded"``).
    (_RATE_CODE, ErrorKind.RATE_LIMIT),
    (_USAGE_CODE, ErrorKind.USAGE_LIMIT),
    (_USAGE, ErrorKind.USAGE_LIMIT),
    (_RATE, ErrorKind.RATE_LIMIT),
)
_TEXT_PATTERNS = (
    (_SESSION_NOT_FOUND, ErrorKind.SESSION_NOT_FOUND),
    *_LIMIT_PATTERNS,
    (_AUTH, ErrorKind.AUTH),
    (_NETWORK, ErrorKind.NETWORK),
    (_SERVER, ErrorKind.SERVER),
    (_INVALID, ErrorKind.INVALID_REQUEST),
)
"""What an error's words mean, the first pattern that matches deciding."""


def _first_kind(
    text: str, patterns: tuple[tuple[re.Pattern[str], ErrorKind], ...]
) -> ErrorKind | None:
    return next((kind for pattern, kind in patterns if pattern.search(text)), None)


def _limit_kind(text: str) -> ErrorKind | None:
    return _first_kind(text, _LIMIT_PATTERNS)


def classify_error_text(text: str, status: int | None = None) -> ErrorKind:
    """Classify an agent's own error message.

    Only for text the CLI itself printed as an error (see the module docstring);
    the caller decides that the run failed.

    Args:
        text: The error message.
        status: An HTTP status from a structured field, if the event had one; else
            one named in the text is used.

    Returns:
        The kind; ``ErrorKind.UNKNOWN`` when nothing matches.
    """
    status = status if status is not None and 400 <= status <= 599 else status_from_text(text)
    if status is not None:
        return kind_for_status(status, text)
    return _first_kind(text, _TEXT_PATTERNS) or ErrorKind.UNKNOWN


def last_line(text: str) -> str | None:
    """The last non-empty line of ``text``, shortened to 400 characters."""
    plain = _ANSI.sub("", text)
    lines = [line.strip() for line in plain.strip().splitlines() if line.strip()]
    return shorten(lines[-1], 400) if lines else None


_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)")


def conclude(
    report: IterationReport,
    exit_code: int,
    stderr_tail: str,
    *,
    program: str,
    now: datetime,
    exit_kind: ErrorKind | None = None,
) -> Classification:
    """The usual verdict for a CLI with a final result event, recorded on ``report``.

    Success is exit 0, the final result event, and no error in it. Otherwise the
    kind comes from the agent's structured error (already on the report), else —
    only because the process failed — from its last non-fatal error event or its
    stderr, read by ``classify_error_text``.

    Args:
        report: The parser's report; ``error_kind``, ``error_text`` and
            ``reset_at_ms`` are filled in when the iteration failed.
        exit_code: The process's exit status.
        stderr_tail: The end of its stderr.
        program: The CLI's name, for messages.
        now: When the process ended (for relative reset times).
        exit_kind: A kind the exit status itself means (Gemini's HTTP status).

    Returns:
        The classification, with the reset time when a limit was hit.
    """
    if report.is_error:
        kind = report.error_kind or ErrorKind.UNKNOWN
        if kind is ErrorKind.UNKNOWN and exit_kind is not None:
            kind = exit_kind
        message = report.error_text or f"{program} reported an error"
    elif exit_code != 0 or not report.result_seen:
        words = report.last_warning or stderr_tail
        kind = exit_kind or (classify_error_text(words) if words.strip() else ErrorKind.UNKNOWN)
        if kind is ErrorKind.UNKNOWN and report.last_warning and stderr_tail.strip():
            kind = classify_error_text(stderr_tail)
        default = (
            f"{program} exited {exit_code}"
            if exit_code != 0
            else f"{program} ended without a result event"
        )
        message = report.last_warning or last_line(stderr_tail) or default
    else:
        return Classification(True)
    reset = report.reset_at_ms
    if reset is None and kind in LIMIT_KINDS:
        reset = parse_reset_time(message, now) or parse_reset_time(stderr_tail[-4000:], now)
    report.error_kind = kind
    report.error_text = message
    report.reset_at_ms = reset
    return Classification(False, kind, message, reset)
