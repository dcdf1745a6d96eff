"""A work tree's mark as the run's log holds it (``workitem_mark``,
``loop.backlog_marks``): its digest, and its content when it fits in a log line — as
it is, or else compressed — so a mark file an agent deleted or rewrote can be put
right from the log.

``<name>Digest`` is ``sha256:`` of the mark's JSON (keys sorted, no spaces); ``<name>``
is the JSON itself, or None when it is over ``MAX_LOGGED_MARK_BYTES``; then
``<name>Z`` is that JSON zlib-compressed and base64-encoded, when that is at most
``MAX_PACKED_MARK_BYTES`` (else the log holds the digest alone). A ``since`` equal to
the ``start`` of the same event is logged as its digest alone (``logged_mark`` takes
the start's content for it).
"""

from __future__ import annotations

import base64
import json
import zlib
from collections.abc import Mapping
from typing import Any

from autopilot.core.digest import sha256_hex
from autopilot.workspace.git import TreeMark

MAX_LOGGED_MARK_BYTES = 6 * 1024
"""A mark larger than this (as JSON) is logged compressed, or as its digest alone when
that is larger still."""

MAX_PACKED_MARK_BYTES = 10 * 1024
"""A compressed mark larger than this is not logged (an event line is at most 16 KiB,
and an event holds one mark's content: a ``since`` equal to its ``start`` is not
repeated)."""

_MAX_UNPACKED_BYTES = 64 * 1024 * 1024


def _mark_json(mark: TreeMark) -> str:
    return json.dumps(mark.to_json(), sort_keys=True, separators=(",", ":"))


def mark_digest(mark: TreeMark) -> str:
    """``sha256:<hex>`` of the mark's JSON (keys sorted, no spaces)."""
    return "sha256:" + sha256_hex(_mark_json(mark).encode("utf-8", "surrogateescape"))


def logged_fields(name: str, mark: TreeMark) -> dict[str, Any]:
    """``<name>Digest``, ``<name>`` and, for a large mark, ``<name>Z`` (see the module
    docstring)."""
    text = _mark_json(mark)
    fields: dict[str, Any] = {f"{name}Digest": mark_digest(mark), name: None}
    if len(text) <= MAX_LOGGED_MARK_BYTES:
        fields[name] = mark.to_json()
        return fields
    packed = base64.b64encode(zlib.compress(text.encode("utf-8", "surrogateescape"), 9))
    if len(packed) <= MAX_PACKED_MARK_BYTES:
        fields[f"{name}Z"] = packed.decode("ascii")
    return fields


def logged_mark(event: Mapping[str, Any], name: str) -> TreeMark | None:
    """The mark ``name`` of a ``workitem_mark`` event: its content, or its compressed
    form (None: only its digest, or damaged)."""
    mark = TreeMark.from_json(event.get(name))
    packed = event.get(f"{name}Z")
    same = name == "since" and event.get("sinceDigest") == event.get("startDigest")
    if mark is None and packed is None and same and event.get("startDigest") is not None:
        return logged_mark(event, "start")
    if mark is not None or not isinstance(packed, str):
        return mark
    try:
        data = base64.b64decode(packed, validate=True)
        text = zlib.decompressobj().decompress(data, _MAX_UNPACKED_BYTES)
        return TreeMark.from_json(json.loads(text))
    except (ValueError, zlib.error, RecursionError):
        return None
