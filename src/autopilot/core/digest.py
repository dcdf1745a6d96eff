"""SHA-256 without loading OpenSSL.

``hashlib`` loads OpenSSL's libcrypto on import, about 3.5 MiB of resident memory in
every driver for a few digests per iteration (responses, work trees, checks). CPython
carries its own SHA-256 (the ``_sha256`` module up to 3.11, ``_sha2`` from 3.12): the
same digests, for a fraction of the memory. ``hashlib`` is the fallback where neither
exists.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Protocol


class Hash(Protocol):
    """The part of a ``hashlib`` hash object autopilot uses."""

    def update(self, data: bytes, /) -> None:
        """Feed more bytes."""
        ...

    def hexdigest(self) -> str:
        """The digest so far, as lowercase hex."""
        ...


def _builtin_sha256() -> Callable[[bytes], Hash]:
    for module, name in (("_sha2", "sha256"), ("_sha256", "sha256")):
        try:
            return getattr(importlib.import_module(module), name)  # type: ignore[no-any-return]
        except (ImportError, AttributeError):
            continue
    import hashlib

    return hashlib.sha256


_SHA256 = _builtin_sha256()


def sha256(data: bytes = b"") -> Hash:
    """A new SHA-256 hash object, fed ``data`` (as ``hashlib.sha256(data)``)."""
    return _SHA256(data)


def sha256_hex(data: bytes) -> str:
    """The SHA-256 of ``data`` as 64 lowercase hex digits."""
    return _SHA256(data).hexdigest()
