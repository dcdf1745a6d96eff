"""One run configuration, built once with one precedence.

Precedence: command-line flag > ``AUTOPILOT_*`` environment variable >
``.autopilot/config.toml`` in the project > the user's ``config.toml``
(``platformdirs.user_config_path("autopilot")``) > defaults. Config files are data
(TOML, parsed with ``tomllib``), never executed (field report 22), and read only as
bounded regular files (``store.files``: a repository can plant a FIFO or a link to
``/dev/zero`` there); an unknown key, a refused file, a file that is not UTF-8 TOML or
a bad value is a one-line ``UsageError`` naming the file and the key as written there.

Integers are ASCII digits only, base 10 (``08`` is eight, field report 9; ``+2``,
``1_0``, ``0x10`` are refused, also as TOML integers); durations are
``90`` (seconds), ``90s``, ``30m``, ``2h``, ``1h30m``, ``2 days`` (parsed by
pytimeparse). Every value is bounded (``MAX_COUNT``, ``MAX_COST_USD``,
``MAX_DURATION_SECONDS``) so that no later arithmetic overflows.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from autopilot.core.adaptive import DEFAULT_EXTENSION, DEFAULT_MAX_TOTAL
from autopilot.core.completion import MatchMode
from autopilot.core.policy import PolicyConfig
from autopilot.errors import StateFileError, UsageError
from autopilot.store.files import MAX_CONFIG_FILE_BYTES, UnsafeFileError, read_bounded_file

DEFAULT_MAX_ITERATIONS = 10
"""Iteration budget when none is given; unlimited needs ``--max-iterations 0``."""


MAX_COUNT = 10**12
"""Upper bound of every whole-number setting (iterations, tokens, limits)."""

MAX_COST_USD = 1e9
"""Upper bound of a USD amount."""

_YEAR_SECONDS = 365 * 24 * 3600
MAX_DURATION_SECONDS = 10 * _YEAR_SECONDS
"""Upper bound of every duration: ten years."""

_INT_RE = re.compile(r"[0-9]+")
_SURROGATE_RE = re.compile("[\ud800-\udfff]")
_SHOWN_CHARS = 40


def _shown(text: str) -> str:
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
        raise UsageError(f"{name} must be a whole number in digits 0-9, got {_shown(text)}")
    # Count digits before converting: int() refuses strings over 4300 digits.
    digits = cleaned.lstrip("0") or "0"
    if len(digits) > len(str(maximum)):
        raise UsageError(f"{name} must be at most {maximum}, got {_shown(text)}")
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
        raise UsageError(f"{name} must be a number, got {_shown(text)}")
    if not math.isfinite(value) or value < 0:
        raise UsageError(f"{name} must be a non-negative number, got {_shown(text)}")
    if value > maximum:
        raise UsageError(f"{name} must be at most {maximum:.15g}, got {_shown(text)}")
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
        raise UsageError(f"{name} must be a duration like 90s, 30m or 2h, got {_shown(text)}")
    if seconds <= 0:
        raise UsageError(f"{name} must be longer than zero, got {_shown(text)}")
    if seconds > maximum:
        raise UsageError(
            f"{name} must be at most {maximum / _YEAR_SECONDS:g} years, got {_shown(text)}"
        )
    return seconds


def parse_choice(choices: tuple[str, ...]) -> Callable[[str, str], str]:
    """A parser accepting one of ``choices``."""

    def parse(text: str, name: str) -> str:
        if text not in choices:
            raise UsageError(f"{name} must be one of {', '.join(choices)}; got {_shown(text)}")
        return text

    return parse


def _text(text: str, name: str) -> str:
    return text


def _token(text: str, name: str) -> str:
    if not text.strip() or any(ch.isspace() for ch in text.strip()):
        raise UsageError(f"{name} must be one word without spaces, got {_shown(text)}")
    return text.strip()


@dataclass(frozen=True)
class RunConfig:
    """Everything a run is armed with; stored in ``state.json`` for restarts.

    Durations are seconds; ``None`` limits are off. ``checkpoints`` is ``on`` or
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
    "adaptive_extension": ("a whole number", (int,)),
    "adaptive_max_total": ("a whole number", (int,)),
    "max_cost_usd": ("a number", (int, float)),
    "max_duration_seconds": ("a number of seconds", (int, float)),
    "iteration_timeout_seconds": ("a number of seconds", (int, float)),
    "idle_timeout_seconds": ("a number of seconds", (int, float)),
    "result_grace_seconds": ("a number of seconds", (int, float)),
}
"""JSON types of the ``RunConfig`` fields that are not strings."""


def _json_urls(value: Any) -> tuple[str, ...]:
    """``config.notify`` from ``state.json``: a list of URLs.

    Raises:
        UsageError: not a list of URL strings.
    """
    if not isinstance(value, list) or not all(isinstance(url, str) for url in value):
        raise UsageError("field 'config.notify' must be a list of URLs")
    return _urls(" ".join(value), "field 'config.notify'")


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
            return tuple(_command(item, where) for item in value)
        return tuple(_env_pattern(item, where) for item in value)
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


def _env_pattern(text: str, name: str) -> str:
    pattern = text.strip()
    if not _ENV_PATTERN_RE.fullmatch(pattern):
        raise UsageError(
            f"{name} must be variable names or globs like AWS_* (letters, digits, _ * ? [ ]), "
            f"got {_shown(text)}"
        )
    return pattern


def _env_patterns(text: str, name: str) -> tuple[str, ...]:
    """``AWS_*,*_TOKEN`` (commas or spaces between) → the glob patterns."""
    return tuple(_env_pattern(item, name) for item in re.split(r"[,\s]+", text) if item)


MAX_VERIFY_COMMANDS = 20
MAX_COMMAND_CHARS = 4000


def _command(text: str, name: str) -> str:
    command = text.strip()
    if not command or "\n" in command or "\0" in command or len(command) > MAX_COMMAND_CHARS:
        raise UsageError(
            f"{name} must be a command line of 1-{MAX_COMMAND_CHARS} characters, got {_shown(text)}"
        )
    return command


def _commands(text: str, name: str) -> tuple[str, ...]:
    """Shell command lines, one per line (``--verify`` given twice: two lines)."""
    commands = tuple(_command(line, name) for line in text.split("\n"))
    if len(commands) > MAX_VERIFY_COMMANDS:
        raise UsageError(f"{name}: at most {MAX_VERIFY_COMMANDS} commands, got {len(commands)}")
    return commands


def _urls(text: str, name: str) -> tuple[str, ...]:
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
    "completion-promise": ("completion_promise", _token),
    "abort-promise": ("abort_promise", _token),
    "completion-match": ("completion_match", parse_choice(tuple(m.value for m in MatchMode))),
    "stagnation-limit": ("stagnation_limit", _int_setting(0)),
    "context": ("context", parse_choice(("fresh", "continue"))),
    "prompt-via": ("prompt_via", parse_choice(("stdin", "arg", "file"))),
    "env-exclude": ("env_exclude", _env_patterns),
    "notify": ("notify", _urls),
    "checkpoints": ("checkpoints", parse_choice(("on", "off"))),
    "verify": ("verify", _commands),
    "adaptive-extension": ("adaptive_extension", _int_setting(0)),
    "adaptive-max-total": ("adaptive_max_total", _int_setting(1)),
}
"""Settable keys: the flag name (also the TOML key, ``-`` or ``_``) → field, parser."""

_UNION_SETTINGS = frozenset({"env-exclude"})
"""Settings whose values from every layer add up instead of the first one winning:
a project's config can drop more variables from the agent's environment, never
bring back one the user's config drops."""


_LIST_SETTINGS = frozenset({"notify", "verify"})
"""Settings that may be a TOML list of strings (``notify = ["ntfy://a", …]``)."""

_SWITCH_SETTINGS = frozenset({"checkpoints"})
"""``on``/``off`` settings that may also be a TOML boolean (``checkpoints = false``)."""
_LINE_SETTINGS = frozenset({"verify"})
"""List settings whose items may hold spaces: a list is joined with newlines."""


def user_config_path() -> Path:
    """The user's config file (``~/.config/autopilot/config.toml`` on Linux)."""
    import platformdirs

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
    import tomllib  # only where a config file is read

    try:
        raw = read_bounded_file(path, max_bytes=MAX_CONFIG_FILE_BYTES, project=project)
        document = raw.decode("utf-8")
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
            raise UsageError(f"{path}: unknown setting {_shown(key)}")
        if flag in keys:
            raise UsageError(f"{path}: {keys[flag]} and {key} are the same setting")
        if flag in _UNION_SETTINGS | _LIST_SETTINGS and isinstance(value, list):
            if not all(isinstance(item, str) for item in value):
                raise UsageError(f"{path}: {key} must be a list of strings")
            joint = "," if flag in _UNION_SETTINGS else "\n" if flag in _LINE_SETTINGS else " "
            text = joint.join(value)
        elif isinstance(value, bool) and flag in _SWITCH_SETTINGS:
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
            if _SURROGATE_RE.search(raw):
                raise UsageError(f"{where} is not valid UTF-8 text")
            if flag in _UNION_SETTINGS:
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
