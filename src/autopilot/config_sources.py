"""Where each setting of a run comes from, with one precedence.

Precedence: command-line flag > ``AUTOPILOT_*`` environment variable >
``.autopilot/config.toml`` in the project > the user's ``config.toml``
(``platformdirs.user_config_path("autopilot")``) > defaults. Config files are data
(TOML, parsed with ``tomllib``), never executed (a cloned repository's config must not
run code: https://github.com/frankbria/ralph-claude-code/issues/346), and read only as
bounded regular files (``store.files``: a repository can plant a FIFO or a link to
``/dev/zero`` there); an unknown key, a refused file, a file that is not UTF-8 TOML or
a bad value is a one-line ``UsageError`` naming the file and the key as written there.
Each value is parsed by its setting's parser (``config_values``); a TOML integer is
held to digits only as a flag is. The result is a ``config.RunConfig``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from autopilot.config import RunConfig
from autopilot.config_values import (
    LINE_SETTINGS,
    LIST_SETTINGS,
    SETTINGS,
    SWITCH_SETTINGS,
    UNION_SETTINGS,
    shown,
)
from autopilot.core.structs import replace
from autopilot.errors import UsageError
from autopilot.store.files import MAX_CONFIG_FILE_BYTES, UnsafeFileError, read_bounded_file
from autopilot.store.xdg import xdg_config_file


def _has_surrogate(text: str) -> bool:
    """Whether ``text`` holds a surrogate code point (bytes that were not UTF-8)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


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
