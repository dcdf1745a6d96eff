"""One run configuration, built once with one precedence.

Precedence: command-line flag > ``AUTOPILOT_*`` environment variable >
``.autopilot/config.toml`` in the project > the user's ``config.toml``
(``platformdirs.user_config_path("autopilot")``) > defaults. Config files are data
(TOML, parsed with ``tomllib``), never executed (field report 22); an unknown key or
a bad value is a one-line ``UsageError`` naming the file and key.

Integers are base 10 (``08`` is eight, field report 9); durations are ``90``
(seconds), ``90s``, ``30m``, ``2h``, ``1h30m``, ``2 days`` (parsed by pytimeparse).
"""

from __future__ import annotations

import math
import os
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import platformdirs
from pytimeparse.timeparse import timeparse

from autopilot.errors import UsageError
from autopilot.loop.completion import MatchMode
from autopilot.loop.policy import PolicyConfig

DEFAULT_MAX_ITERATIONS = 10
"""Iteration budget when none is given; unlimited needs ``--max-iterations 0``."""


def parse_int(text: str, *, name: str, minimum: int = 0) -> int:
    """Parse a base-10 integer (``08`` is 8), at least ``minimum``.

    Raises:
        UsageError: not a base-10 integer, or below ``minimum``.
    """
    cleaned = text.strip().replace("_", "")
    if not cleaned.lstrip("+").isdigit():
        raise UsageError(f"{name} must be a whole number, got {text!r}")
    value = int(cleaned, 10)
    if value < minimum:
        raise UsageError(f"{name} must be at least {minimum}, got {value}")
    return value


def parse_float(text: str, *, name: str) -> float:
    """Parse a non-negative finite number (e.g. a USD amount; a leading ``$`` is ok).

    Raises:
        UsageError: not a number, negative, NaN or infinite.
    """
    try:
        value = float(text.strip().lstrip("$"))
    except ValueError:
        raise UsageError(f"{name} must be a number, got {text!r}") from None
    if not math.isfinite(value) or value < 0:
        raise UsageError(f"{name} must be a non-negative number, got {text!r}")
    return value


def parse_duration_seconds(text: str, *, name: str) -> float:
    """Parse ``90``, ``90s``, ``30m``, ``2h``, ``1h30m``, ``2 days`` into seconds.

    Raises:
        UsageError: unreadable, zero or negative.
    """
    stripped = text.strip()
    seconds: float | None
    try:
        seconds = float(stripped)
    except ValueError:
        parsed = timeparse(stripped)
        seconds = float(parsed) if parsed is not None else None
    if seconds is None or not math.isfinite(seconds):
        raise UsageError(f"{name} must be a duration like 90s, 30m or 2h, got {text!r}")
    if seconds <= 0:
        raise UsageError(f"{name} must be longer than zero, got {text!r}")
    return seconds


def parse_choice(choices: tuple[str, ...]) -> Callable[[str, str], str]:
    """A parser accepting one of ``choices``."""

    def parse(text: str, name: str) -> str:
        if text not in choices:
            raise UsageError(f"{name} must be one of {', '.join(choices)}; got {text!r}")
        return text

    return parse


def _text(text: str, name: str) -> str:
    return text


def _token(text: str, name: str) -> str:
    if not text.strip() or any(ch.isspace() for ch in text.strip()):
        raise UsageError(f"{name} must be one word without spaces, got {text!r}")
    return text.strip()


@dataclass(frozen=True)
class RunConfig:
    """Everything a run is armed with; stored in ``state.json`` for restarts.

    Durations are seconds; ``None`` limits are off. ``max_iterations`` 0 means
    unlimited, which must be asked for explicitly.
    """

    agent: str = "claude"
    model: str | None = None
    label: str | None = None
    max_iterations: int = DEFAULT_MAX_ITERATIONS
    min_iterations: int = 1
    max_cost_usd: float | None = None
    max_tokens: int | None = None
    max_duration_seconds: float | None = None
    iteration_timeout_seconds: float | None = 30 * 60
    idle_timeout_seconds: float | None = 10 * 60
    result_grace_seconds: float = 5.0
    completion_promise: str = "COMPLETE"
    abort_promise: str | None = None
    completion_match: str = MatchMode.WORD.value
    stagnation_limit: int = 3
    context: str = "fresh"
    prompt_via: str = "stdin"
    sources: dict[str, str] = field(default_factory=dict, compare=False)

    def policy(self) -> PolicyConfig:
        """The limits and promises as the decision policy takes them."""
        return PolicyConfig(
            completion_promise=self.completion_promise,
            abort_promise=self.abort_promise,
            match_mode=MatchMode(self.completion_match),
            min_iterations=self.min_iterations,
            max_iterations=self.max_iterations or None,
            stagnation_limit=self.stagnation_limit,
            max_cost_usd=self.max_cost_usd,
            max_tokens=self.max_tokens,
            max_duration_ms=(
                int(self.max_duration_seconds * 1000) if self.max_duration_seconds else None
            ),
        )

    def to_json(self) -> dict[str, Any]:
        """The settings as a JSON object (``sources`` left out)."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "sources"}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RunConfig:
        """Rebuild from ``to_json`` output, ignoring unknown keys."""
        known = {f.name for f in fields(cls)} - {"sources"}
        return cls(**{k: v for k, v in data.items() if k in known})


def _int_setting(minimum: int) -> Callable[[str, str], int]:
    return lambda text, name: parse_int(text, name=name, minimum=minimum)


def _float_setting(text: str, name: str) -> float:
    return parse_float(text, name=name)


def _duration_setting(text: str, name: str) -> float:
    return parse_duration_seconds(text, name=name)


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
    "completion-promise": ("completion_promise", _token),
    "abort-promise": ("abort_promise", _token),
    "completion-match": ("completion_match", parse_choice(tuple(m.value for m in MatchMode))),
    "stagnation-limit": ("stagnation_limit", _int_setting(0)),
    "context": ("context", parse_choice(("fresh", "continue"))),
    "prompt-via": ("prompt_via", parse_choice(("stdin", "arg", "file"))),
}
"""Settable keys: the flag name (also the TOML key, ``-`` or ``_``) → field, parser."""


def user_config_path() -> Path:
    """The user's config file (``~/.config/autopilot/config.toml`` on Linux)."""
    return platformdirs.user_config_path("autopilot") / "config.toml"


def _load_toml(path: Path) -> dict[str, str]:
    try:
        with path.open("rb") as handle:
            data = tomllib.load(handle)
    except FileNotFoundError:
        return {}
    except tomllib.TOMLDecodeError as error:
        raise UsageError(f"{path}: not valid TOML ({error})") from None
    except OSError as error:
        raise UsageError(f"{path}: cannot read ({error.strerror or error})") from None
    values: dict[str, str] = {}
    for key, value in data.items():
        flag = key.replace("_", "-")
        if flag not in SETTINGS:
            raise UsageError(f"{path}: unknown setting {key!r}")
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            raise UsageError(f"{path}: {key} must be a string or a number")
        values[flag] = str(value)
    return values


def build_config(
    flags: Mapping[str, str | None],
    *,
    project: Path,
    environ: Mapping[str, str] | None = None,
    user_config: Path | None = None,
) -> RunConfig:
    """Merge flags, environment, project config, user config and defaults.

    Args:
        flags: Flag name (e.g. ``max-iterations``) → the raw text given, or None.
        project: The project directory (its ``.autopilot/config.toml`` is read).
        environ: The environment (``AUTOPILOT_MAX_ITERATIONS`` etc.).
        user_config: The user's config file (default ``user_config_path()``).

    Returns:
        The config; ``sources`` says where each non-default value came from.

    Raises:
        UsageError: an unknown key or a bad value, naming where it came from.
    """
    environ = os.environ if environ is None else environ
    layers: list[tuple[str, Mapping[str, str | None]]] = [
        ("flag", flags),
        (
            "environment",
            {flag: environ.get("AUTOPILOT_" + flag.upper().replace("-", "_")) for flag in SETTINGS},
        ),
        (
            str(project / ".autopilot" / "config.toml"),
            _load_toml(project / ".autopilot" / "config.toml"),
        ),
        (str(user_config or user_config_path()), _load_toml(user_config or user_config_path())),
    ]
    config = RunConfig()
    changes: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for flag, (field_name, parse) in SETTINGS.items():
        for source, values in layers:
            raw = values.get(flag)
            if raw is None:
                continue
            where = f"--{flag}" if source == "flag" else f"{flag} in {source}"
            if source == "environment":
                where = "AUTOPILOT_" + flag.upper().replace("-", "_")
            changes[field_name] = parse(raw, where)
            sources[field_name] = source
            break
    config = replace(config, **changes, sources=sources)
    if config.max_iterations and config.min_iterations > config.max_iterations:
        raise UsageError(
            f"--min-iterations {config.min_iterations} is above --max-iterations "
            f"{config.max_iterations}"
        )
    if config.abort_promise and config.abort_promise == config.completion_promise:
        raise UsageError("--abort-promise must differ from --completion-promise")
    return config
