"""Fixtures for the model server tests: a server running a script by name."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from autopilot.testkit.model_server import ModelServer


@pytest.fixture
def server(request: pytest.FixtureRequest) -> Iterator[ModelServer]:
    """A running server; parametrize indirectly with a script name (default "default")."""
    script = getattr(request, "param", "default")
    with ModelServer(script=script) as srv:
        yield srv


def scripted(*names: str) -> pytest.MarkDecorator:
    """Run the test once per script name, with ``server`` running it."""
    return pytest.mark.parametrize("server", list(names), indirect=True)
