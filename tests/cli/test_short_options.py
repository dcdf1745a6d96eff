"""``ShortFirstCommand`` parses what click's own command parses, the same way, with
the same errors: only the failing long try of a short option is skipped."""

from __future__ import annotations

import sys

import click
import pytest
from click.testing import CliRunner

from autopilot.cli.short_options import ShortFirstCommand


def _command(cls: type[click.Command]) -> click.Command:
    @click.command(cls=cls, context_settings={"help_option_names": ["-h", "--help"]})
    @click.option("-p", "--prompt")
    @click.option("-f", "--prompt-file")
    @click.option("-v", "--verbose", is_flag=True)
    @click.option("-n", "--count", type=int)
    @click.option("--plain", is_flag=True)
    @click.argument("rest", nargs=-1)
    def command(**values: object) -> None:
        click.echo(repr(sorted(values.items())))

    return command


@pytest.mark.parametrize(
    "args",
    [
        ["-p", "x"],
        ["-px"],
        ["-p=x"],
        ["-vpx"],
        ["-vn", "3", "-p", "y"],
        ["-n3", "-v"],
        ["-p"],
        ["-z"],
        ["-vz"],
        ["-nx"],
        ["--promp", "x"],
        ["--prompt=x", "-f", "a", "b"],
        ["--", "-p", "x"],
        ["-", "-p", "x"],
        ["-h"],
        ["-p", "x", "-p", "y"],
        ["--plain", "-p", "-v"],
    ],
)
def test_it_parses_and_fails_as_click_does(args: list[str]) -> None:
    runner = CliRunner()
    theirs = runner.invoke(_command(click.Command), args, prog_name="x")
    ours = runner.invoke(_command(ShortFirstCommand), args, prog_name="x")
    assert (ours.exit_code, ours.output) == (theirs.exit_code, theirs.output)


def test_a_short_option_does_not_build_the_long_error() -> None:
    sys.modules.pop("difflib", None)
    result = CliRunner().invoke(_command(ShortFirstCommand), ["-vpx", "-n", "2"])
    assert result.exit_code == 0, result.output
    assert "difflib" not in sys.modules
