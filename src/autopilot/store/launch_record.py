"""What starting a run again needs, recorded once when it is armed, so a run whose
``state.json`` was lost can be rebuilt from its folder and started again
(``manage.repair``, ``docs/formats.md``).

The ``armed`` event carries it as ``launch``::

    {"config": RunConfig, "prompt": {"text", "path"}, "extraArgs": [...],
     "command": [...], "extra": {...}}

— the same objects as ``state.json``'s ``config``, ``prompt``, ``extraArgs``,
``command`` and its extra fields (a work tree, a lane). The seed's reader keeps extra
fields of a line and its fold ignores this one. When the object does not fit in the
event's line (``MAX_EVENT_LINE_BYTES``: a long prompt text) or holds something the log
would redact (a notification URL with a password), it is written once to
``launch.json`` in the run folder instead, and ``launch`` is ``{"file": "launch.json",
"sha256": HEX}`` (the file's digest, so a damaged copy is never used).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from msgspec import Struct, field

from autopilot.config import RunConfig
from autopilot.core.redact import redact_value
from autopilot.errors import StateFileError
from autopilot.store.atomic import write_atomically
from autopilot.store.event_format import MAX_EVENT_LINE_BYTES, serialize_event
from autopilot.store.run_state import PromptSource
from autopilot.store.rundir import LAUNCH_FILE, RunDir

LAUNCH_KEY = "launch"
"""The ``armed`` event's field (left out of the run's ``index.jsonl`` row)."""

_TS_MARGIN_BYTES = 64
"""Room in the line for the ``ts`` the log stamps (the probe has a short one)."""


class LaunchRecord(Struct, frozen=True):
    """What a run was armed with beyond its identity and counters."""

    config: RunConfig
    prompt: PromptSource
    extra_args: tuple[str, ...] = ()
    command: tuple[str, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The inline ``launch`` object."""
        return {
            "config": self.config.to_json(),
            "prompt": self.prompt.to_json(),
            "extraArgs": list(self.extra_args),
            "command": list(self.command),
            "extra": dict(self.extra),
        }


def launch_field(folder: RunDir, record: LaunchRecord, armed: Mapping[str, Any]) -> dict[str, Any]:
    """The ``launch`` field of the ``armed`` event ``armed`` (its other fields, with
    ``type`` and ``runId``): the record itself when the line holds it unchanged, else
    a reference to ``launch.json``, written now in the run folder ``folder``.

    Raises:
        OSError: ``launch.json`` cannot be written.
    """
    inline = record.to_json()
    probe = {**armed, "ts": 0, LAUNCH_KEY: inline}
    try:
        line = serialize_event(probe)
    except ValueError:
        line = None
    if (
        line is not None
        and len(line) + _TS_MARGIN_BYTES <= MAX_EVENT_LINE_BYTES
        and redact_value(inline) == inline
    ):
        return inline
    import hashlib  # only for a record kept beside the log: a driver's start skips it

    data = json.dumps(inline, indent=1).encode("ascii")
    write_atomically(folder.launch, data)
    return {"file": LAUNCH_FILE, "sha256": hashlib.sha256(data).hexdigest()}


def launch_of(armed: Mapping[str, Any], folder: RunDir) -> LaunchRecord | None:
    """The record an ``armed`` event of the run in ``folder`` carries, or None when it
    has none (a run armed before it was recorded, or by another implementation), its
    ``launch.json`` is missing or does not match its digest, or a value is malformed."""
    value = armed.get(LAUNCH_KEY)
    if not isinstance(value, dict):
        return None
    if "file" in value:
        value = _read_file(value, folder)
        if value is None:
            return None
    try:
        config = RunConfig.from_json(value.get("config"), source=f"{folder.events}: armed launch")
    except StateFileError:
        return None
    prompt = value.get("prompt")
    if not isinstance(prompt, dict):
        return None
    text, path = prompt.get("text"), prompt.get("path")
    if not isinstance(text, str | None) or not isinstance(path, str | None):
        return None
    extra_args, command = _strings(value.get("extraArgs")), _strings(value.get("command"))
    extra = value.get("extra", {})
    if extra_args is None or command is None or not isinstance(extra, dict):
        return None
    return LaunchRecord(
        config=config,
        prompt=PromptSource(text=text, path=Path(path) if path else None),
        extra_args=extra_args,
        command=command,
        extra=extra,
    )


def _read_file(reference: dict[str, Any], folder: RunDir) -> dict[str, Any] | None:
    import hashlib

    if reference.get("file") != LAUNCH_FILE or not isinstance(reference.get("sha256"), str):
        return None  # only ever this one file of the run folder
    try:
        data = folder.launch.read_bytes()
    except OSError:
        return None
    if hashlib.sha256(data).hexdigest() != reference["sha256"]:
        return None
    try:
        value = json.loads(data)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def _strings(value: Any) -> tuple[str, ...] | None:
    if value is None:
        return ()
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return tuple(value)
    return None
