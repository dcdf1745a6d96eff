"""A click command whose parser takes a short option (``-p``) as one at once.

Click tries every option as a long one first: ``-p`` is not one, so it builds a
``NoSuchOption`` (its message, and the close matches among the long options, which
imports ``difflib``) only to catch it and try the short options. ``ShortFirstCommand``
skips that try where it can only fail; the syntax it accepts, and every error it
prints, are click's own."""

from __future__ import annotations

from typing import Any

import click
from click import parser as click_parser

_BASE: Any = getattr(click_parser, "_OptionParser", None) or click_parser.OptionParser
"""click's option parser (``_OptionParser`` since click 8.2, ``OptionParser`` before)."""


class _ShortFirstParser(_BASE):  # type: ignore[misc]
    """Click's parser, which hands an argument that cannot name a long option (its
    first two characters are no prefix such as ``--``, and what stands before any
    ``=`` names none) to the short options without the long try that must fail."""

    def _process_opts(self, arg: str, state: Any) -> None:
        plain_names = self.ctx is None or self.ctx.token_normalize_func is None
        if (
            plain_names
            and arg[:2] not in self._opt_prefixes
            and arg.split("=", 1)[0] not in self._long_opt
        ):
            self._match_short_opt(arg, state)
            return
        super()._process_opts(arg, state)


class ShortFirstCommand(click.Command):
    """A ``click.Command`` parsed by ``_ShortFirstParser``."""

    def make_parser(self, ctx: click.Context) -> Any:
        parser = super().make_parser(ctx)
        if type(parser) is _BASE and hasattr(parser, "_process_opts"):
            parser.__class__ = _ShortFirstParser
        return parser
