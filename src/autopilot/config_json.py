"""``config`` in ``state.json`` checked as ``RunConfig.from_json`` reads it back, without
building a ``RunConfig``: the control commands (``pause``, ``resume``, ``stop``,
``send``) check a state this way without loading msgspec and the typed records
(``store.state_file``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from autopilot.config_values import (
    MAX_COUNT,
    SETTINGS,
    parse_command,
    parse_env_pattern,
    parse_urls,
)
from autopilot.errors import StateFileError, UsageError

TYPE_CHECKING = False  # as typing's, without importing typing at run time
if TYPE_CHECKING:
    from typing import Any

CONFIG_FIELDS = (
    "agent",
    "model",
    "label",
    "max_iterations",
    "min_iterations",
    "max_cost_usd",
    "max_tokens",
    "max_duration_seconds",
    "iteration_timeout_seconds",
    "idle_timeout_seconds",
    "result_grace_seconds",
    "check_timeout_seconds",
    "max_item_attempts",
    "completion_promise",
    "abort_promise",
    "completion_match",
    "stagnation_limit",
    "context",
    "prompt_via",
    "env_exclude",
    "notify",
    "checkpoints",
    "verify",
    "adaptive_extension",
    "adaptive_max_total",
)
"""``RunConfig``'s fields as ``state.json`` holds them, in order (``sources`` is not
written); ``tests/test_config.py`` checks they are the record's."""


def check_config_json(data: Any, *, source: str = "state.json") -> dict[str, Any]:
    """The values of a ``state.json``'s ``config`` by field name, each checked as
    ``build_config`` checks it (type, range, choice); unknown keys are left out,
    missing ones are not given.

    Raises:
        StateFileError: ``data`` is not an object, or a value has the wrong type or is
            out of range, e.g. ``state.json: field 'config.completion_match' must be
            one of word, tag, substring; got 'x' (corrupt state file)``.
    """
    if not isinstance(data, Mapping):
        raise StateFileError(f"{source}: field 'config' must be an object (corrupt state file)")
    parsers = dict(SETTINGS.values())
    values: dict[str, Any] = {}
    for name in CONFIG_FIELDS:
        if name not in data:
            continue
        try:
            if name == "notify":
                values[name] = _json_urls(data[name])
                continue
            values[name] = _json_value(data[name], name, parsers.get(name))
        except UsageError as error:
            raise StateFileError(f"{source}: {error} (corrupt state file)") from None
    return values


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
