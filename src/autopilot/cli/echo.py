"""How every command prints: through ``view.safe``, so nothing an agent wrote can
drive the terminal and no well-known secret is shown."""

from __future__ import annotations

from typing import Any

import click

from autopilot.view.safe import shown, shown_json


def say(text: str = "", *, err: bool = False) -> None:
    """Print ``text`` (lines kept) with secrets redacted and controls escaped."""
    click.echo(shown(text, newlines=True), err=err)


def say_json(value: Any, *, indent: int | None = None) -> None:
    """Print ``value`` as JSON, redacted, with controls ``\\u``-escaped."""
    click.echo(shown_json(value, indent=indent))
