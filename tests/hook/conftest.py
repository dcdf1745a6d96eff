"""The project a hook run is armed in: a git repository (``tests/conftest.py``'s)."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def project(repo: Path) -> Path:
    return repo
