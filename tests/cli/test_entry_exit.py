"""How the console entry ends a command that went through the command line: with the
command's status and all its output, after every exit handler the command registered,
and without tearing its modules down (``launch._Ending``)."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

PROBE = """
import atexit, sys
import autopilot.cli.main as command_line

def main():
    atexit.register(lambda: print("the command's handler ran", flush=True))
    print("buffered output", end="")
    how = sys.argv[1]
    if how == "message":
        sys.exit("a message instead of a status")
    if how == "interrupt":
        raise KeyboardInterrupt
    if how == "error":
        raise RuntimeError("a bug")
    sys.exit(int(how))

command_line.main = main
from autopilot.launch import main as entry
entry()
"""


def _entry(how: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", PROBE, how],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize("status", [0, 3, 256 + 7])
def test_the_status_and_the_output_are_the_commands(tmp_path: Path, status: int) -> None:
    done = _entry(str(status), tmp_path)
    assert done.returncode == status & 0xFF
    assert done.stdout == "buffered outputthe command's handler ran\n"


def test_a_message_is_status_one_and_printed(tmp_path: Path) -> None:
    done = _entry("message", tmp_path)
    assert done.returncode == 1
    assert done.stderr.strip() == "a message instead of a status"
    assert done.stdout.endswith("the command's handler ran\n")


def test_a_crash_and_an_interrupt_end_as_python_ends_them(tmp_path: Path) -> None:
    crashed = _entry("error", tmp_path)
    assert crashed.returncode == 1 and "RuntimeError: a bug" in crashed.stderr
    assert crashed.stdout.endswith("the command's handler ran\n")
    interrupted = _entry("interrupt", tmp_path)
    assert interrupted.returncode == -signal.SIGINT
