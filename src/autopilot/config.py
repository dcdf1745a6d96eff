"""One run configuration, built once with one precedence.

Precedence: command-line flag > ``AUTOPILOT_*`` environment variable >
``.autopilot/config.toml`` in the project > the user's ``config.toml``
(``platformdirs.user_config_path("autopilot")``) > defaults. Config files are data
(TOML, parsed with ``tomllib``), never executed (field report 22), and read only as
bounded regular files (``store.files``: a repository can plant a FIFO or a link to
``/dev/zero`` there); an unknown key, a refused file, a file that is not UTF-8 TOML or
a bad value is a one-line ``UsageError`` naming the file and the key as written there.
Each value is parsed by its setting's parser (``config_values``); a TOML integer is
held to digits only as a flag is.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path

from autopilot.config_values import (
    LINE_SETTINGS,
    LIST_SETTINGS,
    MAX_COUNT,
    SETTINGS,
    SWITCH_SETTINGS,
    UNION_SETTINGS,
    parse_command,
    parse_env_pattern,
    parse_urls,
    shown,
)
from autopilot.core.vocabulary import DEFAULT_EXTENSION, DEFAULT_MAX_TOTAL, MatchMode
from autopilot.errors import StateFileError, UsageError
from autopilot.store.files import MAX_CONFIG_FILE_BYTES, UnsafeFileError, read_bounded_file
from autopilot.store.xdg import xdg_config_file

TYPE_CHECKING = False  # as typing's, without importing typing at run time
if TYPE_CHECKING:  # the decision policy loads only where a run decides
    from typing import Any

    from autopilot.core.policy import PolicyConfig


def _has_surrogate(text: str) -> bool:
    """Whether ``text`` holds a surrogate code point (bytes that were not UTF-8)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


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


def user_config_path() -> Path:
    """The user's config file (``~/.config/autopilot/config.toml`` on Linux)."""
    quick = xdg_config_file()
    if quick is not None:
        return Path(quick)
    import platformdirs  # only where the platform's rule needs it

    return platformdirs.user_config_path("autopilot") / "config.toml"


_KeyedValues = dict[str, tuple[str, str]]
"""Flag name → (where it was given, for messages; the raw text)."""


def _load_toml(path: Path, project: Path | None = None) -> _KeyedValues:
    """The settings in a config file, keyed by flag name.

    Only a regular file of at most ``MAX_CONFIG_FILE_BYTES`` is read, and inside
    ``project`` not through a symlink that leads out of it: a repository can plant a
    link to ``/dev/zero`` or a FIFO where its config should be.

    Raises:
        UsageError: the file cannot be read or is refused, is not UTF-8 TOML, nests
            too deeply, names an unknown setting or the same one twice, or holds a
            value that is not a string or a number; the message names the file and
            the key.
    """
    try:
        raw = read_bounded_file(path, max_bytes=MAX_CONFIG_FILE_BYTES, project=project)
        document = raw.decode("utf-8")
        import tomllib  # only where a config file exists

        data = tomllib.loads(document)
    except FileNotFoundError:
        return {}
    except UnsafeFileError as error:
        raise UsageError(f"{path} {error.strerror}") from None
    except UnicodeDecodeError as error:
        raise UsageError(
            f"{path}: not valid UTF-8 (byte {error.start + 1}); save it as UTF-8 TOML"
        ) from None
    except ValueError as error:  # TOMLDecodeError, or an integer of over 4300 digits
        raise UsageError(f"{path}: not valid TOML ({error})") from None
    except RecursionError:
        raise UsageError(f"{path}: not valid TOML (nested too deeply)") from None
    except OSError as error:
        raise UsageError(f"{path}: cannot read ({error.strerror or error})") from None
    values: _KeyedValues = {}
    keys: dict[str, str] = {}
    for key, value in data.items():
        flag = key.replace("_", "-")
        if flag not in SETTINGS:
            raise UsageError(f"{path}: unknown setting {shown(key)}")
        if flag in keys:
            raise UsageError(f"{path}: {keys[flag]} and {key} are the same setting")
        if flag in UNION_SETTINGS | LIST_SETTINGS and isinstance(value, list):
            if not all(isinstance(item, str) for item in value):
                raise UsageError(f"{path}: {key} must be a list of strings")
            joint = "," if flag in UNION_SETTINGS else "\n" if flag in LINE_SETTINGS else " "
            text = joint.join(value)
        elif isinstance(value, bool) and flag in SWITCH_SETTINGS:
            text = "on" if value else "off"
        elif isinstance(value, bool) or not isinstance(value, str | int | float):
            raise UsageError(f"{path}: {key} must be a string or a number")
        elif isinstance(value, int):
            text = _int_as_written(document, key, value)
        else:
            text = str(value)
        keys[flag] = key
        values[flag] = (f"{key} in {path}", text)
    return values


def _int_as_written(text: str, key: str, value: int) -> str:
    """How a top-level TOML integer was written (``+2``, ``1_0``, ``0x10``…), so that
    its setting's parser holds it to digits only as it does a flag; ``str(value)``
    when the line is not found (a key written with escapes)."""
    import tomllib

    name = re.escape(key)
    line = re.compile(rf"^[ \t]*(?:{name}|\"{name}\"|'{name}')[ \t]*=[ \t]*([^\s#]+)", re.M)
    for match in line.finditer(text):
        try:
            written = tomllib.loads(f"v = {match[1]}")["v"]
        except ValueError:
            continue
        if type(written) is int and written == value:
            return match[1]
    return str(value)


def _env_var(flag: str) -> str:
    return "AUTOPILOT_" + flag.upper().replace("-", "_")


def build_config(
    flags: Mapping[str, str | None],
    *,
    project: Path,
    environ: Mapping[str, str] | None = None,
    user_config: Path | None = None,
) -> RunConfig:
    """Merge flags, environment, project config, user config and defaults.

    Every value is parsed and range-checked here, before anything is created.

    Args:
        flags: Flag name (e.g. ``max-iterations``) → the raw text given, or None.
        project: The project directory (its ``.autopilot/config.toml`` is read).
        environ: The environment (``AUTOPILOT_MAX_ITERATIONS`` etc.).
        user_config: The user's config file (default ``user_config_path()``).

    Returns:
        The config; ``sources`` says where each non-default value came from.

    Raises:
        UsageError: an unknown key or a bad value, naming where it came from (the
            flag, the variable, or the file and the key as written in it).
    """
    environ = os.environ if environ is None else environ
    project_file = project / ".autopilot" / "config.toml"
    user_file = user_config or user_config_path()
    layers: list[tuple[str, _KeyedValues]] = [
        ("flag", {flag: (f"--{flag}", raw) for flag, raw in flags.items() if raw is not None}),
        (
            "environment",
            {
                flag: (_env_var(flag), raw)
                for flag in SETTINGS
                if (raw := environ.get(_env_var(flag))) is not None
            },
        ),
        (str(project_file), _load_toml(project_file, project)),
        (str(user_file), _load_toml(user_file)),
    ]
    changes: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for flag, (field_name, parse) in SETTINGS.items():
        for source, values in layers:
            if flag not in values:
                continue
            where, raw = values[flag]
            if _has_surrogate(raw):
                raise UsageError(f"{where} is not valid UTF-8 text")
            if flag in UNION_SETTINGS:
                value = parse(raw, where)
                changes[field_name] = tuple(dict.fromkeys((*changes.get(field_name, ()), *value)))
                sources[field_name] = ", ".join(filter(None, (sources.get(field_name), source)))
                continue
            changes[field_name] = parse(raw, where)
            sources[field_name] = source
            break
    config = replace(RunConfig(), **changes, sources=sources)
    if config.max_iterations and config.min_iterations > config.max_iterations:
        raise UsageError(
            f"--min-iterations {config.min_iterations} is above --max-iterations "
            f"{config.max_iterations}"
        )
    if config.abort_promise and config.abort_promise == config.completion_promise:
        raise UsageError("--abort-promise must differ from --completion-promise")
    return config
