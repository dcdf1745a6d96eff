"""One run configuration: ``RunConfig``, what a run is armed with, and its JSON form
in ``state.json`` (every value checked again as it is read back).

Where each setting comes from (flag, environment, config files, defaults) is
``config_sources``'; each value's parser and bounds are ``config_values``'.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields

from autopilot.config_values import (
    MAX_COUNT,
    SETTINGS,
    parse_command,
    parse_env_pattern,
    parse_urls,
)
from autopilot.core.vocabulary import DEFAULT_EXTENSION, DEFAULT_MAX_TOTAL, MatchMode
from autopilot.errors import StateFileError, UsageError

TYPE_CHECKING = False  # as typing's, without importing typing at run time
if TYPE_CHECKING:  # the decision policy loads only where a run decides
    from typing import Any

    from autopilot.core.policy import PolicyConfig


DEFAULT_MAX_ITERATIONS = 10
"""Iteration budget when none is given; unlimited needs ``--max-iterations 0``."""


@dataclass(frozen=True)
class RunConfig:
    """Everything a run is armed with; stored in ``state.json`` for restarts.

    Durations are seconds; ``None`` limits are off; ``check_timeout_seconds`` bounds
    each check command (a work item's criterion, ``--verify``). ``checkpoints`` is ``on`` or
    ``off`` (``--no-checkpoints``). ``max_iterations`` 0 means
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
    check_timeout_seconds: float = 10 * 60
    max_item_attempts: int = 3
    completion_promise: str = "COMPLETE"
    abort_promise: str | None = None
    completion_match: str = MatchMode.SENTENCE.value
    stagnation_limit: int = 3
    context: str = "fresh"
    prompt_via: str = "stdin"
    env_exclude: tuple[str, ...] = ()
    notify: tuple[str, ...] = ()
    checkpoints: str = "on"
    verify: tuple[str, ...] = ()
    adaptive_extension: int = DEFAULT_EXTENSION
    adaptive_max_total: int = DEFAULT_MAX_TOTAL
    sources: dict[str, str] = field(default_factory=dict, compare=False)

    def policy(self, mode: str = "prompt") -> PolicyConfig:
        """The limits and promises as the decision policy takes them for a run of
        ``mode`` (a ``backlog`` run has its own evidence gate and no verify commands;
        only a ``self-improve`` run extends its iteration budget)."""
        from autopilot.core.policy import PolicyConfig

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
            verify=bool(self.verify) and mode != "backlog",
            adaptive_extension=self.adaptive_extension if mode == "self-improve" else 0,
            adaptive_max_total=self.adaptive_max_total,
            backlog=mode == "backlog",
        )

    def to_json(self) -> dict[str, Any]:
        """The settings as a JSON object (``sources`` left out)."""
        values = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "sources"}
        values["env_exclude"] = list(self.env_exclude)
        values["notify"] = list(self.notify)
        values["verify"] = list(self.verify)
        return values

    @classmethod
    def from_json(cls, data: Any, *, source: str = "state.json") -> RunConfig:
        """Rebuild from ``to_json`` output; unknown keys are ignored, missing ones default.

        Every value is checked as ``build_config`` checks it (type, range, choice), so
        a hand-edited or corrupt ``state.json`` cannot arm a run with a value that
        fails later.

        Args:
            data: The ``config`` object of a ``state.json``.
            source: Where ``data`` came from (a file path), for the message.

        Raises:
            StateFileError: ``data`` is not an object, or a value has the wrong type
                or is out of range, e.g. ``state.json: field 'config.completion_match'
                must be one of word, tag, substring; got 'x' (corrupt state file)``.
        """
        if not isinstance(data, Mapping):
            raise StateFileError(f"{source}: field 'config' must be an object (corrupt state file)")
        parsers = dict(SETTINGS.values())
        values: dict[str, Any] = {}
        for f in fields(cls):
            if f.name == "sources" or f.name not in data:
                continue
            try:
                if f.name == "notify":
                    values[f.name] = _json_urls(data[f.name])
                    continue
                values[f.name] = _json_value(data[f.name], f.name, parsers.get(f.name))
            except UsageError as error:
                raise StateFileError(f"{source}: {error} (corrupt state file)") from None
        return cls(**values)


_OPTIONAL_FIELDS = frozenset(
    {
        "model",
        "label",
        "max_cost_usd",
        "max_tokens",
        "max_duration_seconds",
        "iteration_timeout_seconds",
        "idle_timeout_seconds",
        "abort_promise",
    }
)
"""``RunConfig`` fields that may be ``None`` (off) in ``state.json``."""

_JSON_KINDS: dict[str, tuple[str, tuple[type, ...]]] = {
    "max_iterations": ("a whole number", (int,)),
    "min_iterations": ("a whole number", (int,)),
    "max_tokens": ("a whole number", (int,)),
    "stagnation_limit": ("a whole number", (int,)),
    "max_item_attempts": ("a whole number", (int,)),
    "adaptive_extension": ("a whole number", (int,)),
    "adaptive_max_total": ("a whole number", (int,)),
    "max_cost_usd": ("a number", (int, float)),
    "max_duration_seconds": ("a number of seconds", (int, float)),
    "iteration_timeout_seconds": ("a number of seconds", (int, float)),
    "idle_timeout_seconds": ("a number of seconds", (int, float)),
    "result_grace_seconds": ("a number of seconds", (int, float)),
    "check_timeout_seconds": ("a number of seconds", (int, float)),
}
"""JSON types of the ``RunConfig`` fields that are not strings."""


def _json_urls(value: Any) -> tuple[str, ...]:
    """``config.notify`` from ``state.json``: a list of URLs.

    Raises:
        UsageError: not a list of URL strings.
    """
    if not isinstance(value, list) or not all(isinstance(url, str) for url in value):
        raise UsageError("field 'config.notify' must be a list of URLs")
    return parse_urls(" ".join(value), "field 'config.notify'")


def _json_value(value: Any, name: str, parse: Callable[[str, str], Any] | None) -> Any:
    """Check one ``config`` value from ``state.json`` with its setting's parser.

    Raises:
        UsageError: wrong type or a value the parser refuses.
    """
    where = f"field 'config.{name}'"
    if name in ("env_exclude", "verify"):
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            raise UsageError(f"{where} must be a list of strings")
        if name == "verify":
            return tuple(parse_command(item, where) for item in value)
        return tuple(parse_env_pattern(item, where) for item in value)
    if value is None:
        if name in _OPTIONAL_FIELDS:
            return None
        raise UsageError(f"{where} must not be null")
    kind, types = _JSON_KINDS.get(name, ("a string", (str,)))
    if isinstance(value, bool) or not isinstance(value, types):
        raise UsageError(f"{where} must be {kind}")
    if isinstance(value, int) and value > MAX_COUNT:  # str() of a huge int may fail
        raise UsageError(f"{where} is out of range")
    if parse is not None:
        parse(value if isinstance(value, str) else str(value), where)
    return value
