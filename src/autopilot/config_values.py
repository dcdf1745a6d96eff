"""The value of each setting: its parser, its bounds, and the table of settable keys.

Integers are ASCII digits only, base 10 (``08`` is eight, not an octal error; ``+2``,
``1_0``, ``0x10`` are refused); durations are ``90`` (seconds), ``90s``, ``30m``,
``2h``, ``1h30m``, ``2 days`` (parsed by pytimeparse). Every value is bounded
(``MAX_COUNT``, ``MAX_COST_USD``, ``MAX_DURATION_SECONDS``) so that no later
arithmetic overflows. A bad value is a one-line ``UsageError`` naming where it came from.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable

from autopilot.core.run_words import MatchMode
from autopilot.errors import UsageError

TYPE_CHECKING = False  # as typing's, without importing typing at run time
if TYPE_CHECKING:
    from typing import Any

MAX_COUNT = 10**12
"""Upper bound of every whole-number setting (iterations, tokens, limits)."""

MAX_COST_USD = 1e9
"""Upper bound of a USD amount."""

_YEAR_SECONDS = 365 * 24 * 3600
MAX_DURATION_SECONDS = 10 * _YEAR_SECONDS
"""Upper bound of every duration: ten years."""

_INT_RE = re.compile(r"[0-9]+")
_SHOWN_CHARS = 40


def shown(text: str) -> str:
    """``text`` quoted for an error message, cut so the message stays one short line."""
    return repr(text if len(text) <= _SHOWN_CHARS else text[: _SHOWN_CHARS - 1] + "…")


def parse_int(text: str, *, name: str, minimum: int = 0, maximum: int = MAX_COUNT) -> int:
    """Parse a base-10 integer written in ASCII digits only (``08`` is 8).

    Surrounding whitespace is ignored; a sign, ``_``, other digits (``²``, ``٣``) and
    other bases are refused.

    Raises:
        UsageError: not a base-10 integer, or outside ``minimum``..``maximum``.
    """
    cleaned = text.strip()
    if not _INT_RE.fullmatch(cleaned):
        raise UsageError(f"{name} must be a whole number in digits 0-9, got {shown(text)}")
    # Count digits before converting: int() refuses strings over 4300 digits.
    digits = cleaned.lstrip("0") or "0"
    if len(digits) > len(str(maximum)):
        raise UsageError(f"{name} must be at most {maximum}, got {shown(text)}")
    value = int(digits, 10)
    if value < minimum:
        raise UsageError(f"{name} must be at least {minimum}, got {value}")
    if value > maximum:
        raise UsageError(f"{name} must be at most {maximum}, got {value}")
    return value


def parse_float(text: str, *, name: str, maximum: float = MAX_COST_USD) -> float:
    """Parse a non-negative number up to ``maximum`` (e.g. USD; a leading ``$`` is ok).

    Raises:
        UsageError: not an ASCII number, negative, NaN, infinite or above ``maximum``.
    """
    stripped = text.strip().lstrip("$")
    try:
        value = float(stripped) if stripped.isascii() else None
    except ValueError:
        value = None
    if value is None:
        raise UsageError(f"{name} must be a number, got {shown(text)}")
    if not math.isfinite(value) or value < 0:
        raise UsageError(f"{name} must be a non-negative number, got {shown(text)}")
    if value > maximum:
        raise UsageError(f"{name} must be at most {maximum:.15g}, got {shown(text)}")
    return value


def parse_duration_seconds(text: str, *, name: str, maximum: float = MAX_DURATION_SECONDS) -> float:
    """Parse ``90``, ``90s``, ``30m``, ``2h``, ``1h30m``, ``2 days`` into seconds.

    Raises:
        UsageError: unreadable, zero or negative, or longer than ``maximum`` seconds
            (ten years by default).
    """
    stripped = text.strip()
    seconds: float | None = None
    if stripped.isascii():
        try:
            seconds = float(stripped)
        except ValueError:
            from pytimeparse.timeparse import timeparse  # only where a duration is given

            parsed = timeparse(stripped)
            try:
                seconds = float(parsed) if parsed is not None else None
            except OverflowError:
                seconds = math.inf
    if seconds is None or math.isnan(seconds):
        raise UsageError(f"{name} must be a duration like 90s, 30m or 2h, got {shown(text)}")
    if seconds <= 0:
        raise UsageError(f"{name} must be longer than zero, got {shown(text)}")
    if seconds > maximum:
        raise UsageError(
            f"{name} must be at most {maximum / _YEAR_SECONDS:g} years, got {shown(text)}"
        )
    return seconds


def parse_choice(choices: tuple[str, ...]) -> Callable[[str, str], str]:
    """A parser accepting one of ``choices``."""

    def parse(text: str, name: str) -> str:
        if text not in choices:
            raise UsageError(f"{name} must be one of {', '.join(choices)}; got {shown(text)}")
        return text

    return parse


def _text(text: str, name: str) -> str:
    return text


def _token(text: str, name: str) -> str:
    if not text.strip() or any(ch.isspace() for ch in text.strip()):
        raise UsageError(f"{name} must be one word without spaces, got {shown(text)}")
    return text.strip()


def _int_setting(minimum: int) -> Callable[[str, str], int]:
    return lambda text, name: parse_int(text, name=name, minimum=minimum)


def _float_setting(text: str, name: str) -> float:
    value = parse_float(text, name=name)
    if value <= 0:
        raise UsageError(f"{name} must be more than zero, got {text.strip()!r}")
    return value


def _duration_setting(text: str, name: str) -> float:
    return parse_duration_seconds(text, name=name)


_ENV_PATTERN_RE = re.compile(r"[A-Za-z0-9_*?\[\]!-]+")


def parse_env_pattern(text: str, name: str) -> str:
    pattern = text.strip()
    if not _ENV_PATTERN_RE.fullmatch(pattern):
        raise UsageError(
            f"{name} must be variable names or globs like AWS_* (letters, digits, _ * ? [ ]), "
            f"got {shown(text)}"
        )
    return pattern


def _env_patterns(text: str, name: str) -> tuple[str, ...]:
    """``AWS_*,*_TOKEN`` (commas or spaces between) → the glob patterns."""
    return tuple(parse_env_pattern(item, name) for item in re.split(r"[,\s]+", text) if item)


MAX_VERIFY_COMMANDS = 20
MAX_COMMAND_CHARS = 4000


def parse_command(text: str, name: str) -> str:
    command = text.strip()
    if not command or "\n" in command or "\0" in command or len(command) > MAX_COMMAND_CHARS:
        raise UsageError(
            f"{name} must be a command line of 1-{MAX_COMMAND_CHARS} characters, got {shown(text)}"
        )
    return command


def _commands(text: str, name: str) -> tuple[str, ...]:
    """Shell command lines, one per line (``--verify`` given twice: two lines)."""
    commands = tuple(parse_command(line, name) for line in text.split("\n"))
    if len(commands) > MAX_VERIFY_COMMANDS:
        raise UsageError(f"{name}: at most {MAX_VERIFY_COMMANDS} commands, got {len(commands)}")
    return commands


def parse_urls(text: str, name: str) -> tuple[str, ...]:
    """Notification URLs, separated by whitespace (apprise's own list form).

    Raises:
        UsageError: a word that is not ``scheme://…``.
    """
    urls = tuple(text.split())
    for url in urls:
        scheme, sep, rest = url.partition("://")
        if not sep or not scheme.isascii() or not scheme.isalnum() or not rest:
            shown = url if len(url) <= 20 else url[:19] + "…"
            raise UsageError(f"{name} must be notification URLs like ntfy://topic, got {shown!r}")
    return urls


SETTINGS: dict[str, tuple[str, Callable[[str, str], Any]]] = {
    "agent": ("agent", _text),
    "model": ("model", _text),
    "label": ("label", _text),
    "max-iterations": ("max_iterations", _int_setting(0)),
    "min-iterations": ("min_iterations", _int_setting(1)),
    "max-cost": ("max_cost_usd", _float_setting),
    "max-tokens": ("max_tokens", _int_setting(1)),
    "max-duration": ("max_duration_seconds", _duration_setting),
    "iteration-timeout": ("iteration_timeout_seconds", _duration_setting),
    "idle-timeout": ("idle_timeout_seconds", _duration_setting),
    "result-grace": ("result_grace_seconds", _duration_setting),
    "check-timeout": ("check_timeout_seconds", _duration_setting),
    "completion-promise": ("completion_promise", _token),
    "abort-promise": ("abort_promise", _token),
    "completion-match": ("completion_match", parse_choice(tuple(m.value for m in MatchMode))),
    "stagnation-limit": ("stagnation_limit", _int_setting(0)),
    "max-item-attempts": ("max_item_attempts", _int_setting(0)),
    "context": ("context", parse_choice(("fresh", "continue"))),
    "prompt-via": ("prompt_via", parse_choice(("stdin", "arg", "file"))),
    "env-exclude": ("env_exclude", _env_patterns),
    "notify": ("notify", parse_urls),
    "checkpoints": ("checkpoints", parse_choice(("on", "off"))),
    "verify": ("verify", _commands),
    "adaptive-extension": ("adaptive_extension", _int_setting(0)),
    "adaptive-max-total": ("adaptive_max_total", _int_setting(1)),
}
"""Settable keys: the flag name (also the TOML key, ``-`` or ``_``) → field, parser."""

UNION_SETTINGS = frozenset({"env-exclude"})
"""Settings whose values from every layer add up instead of the first one winning:
a project's config can drop more variables from the agent's environment, never
bring back one the user's config drops."""


LIST_SETTINGS = frozenset({"notify", "verify"})
"""Settings that may be a TOML list of strings (``notify = ["ntfy://a", …]``)."""

SWITCH_SETTINGS = frozenset({"checkpoints"})
"""``on``/``off`` settings that may also be a TOML boolean (``checkpoints = false``)."""
LINE_SETTINGS = frozenset({"verify"})
"""List settings whose items may hold spaces: a list is joined with newlines."""
