"""Keeping the machine awake while a run is active (a usage-limit wait above all), with
the platform's own sleep inhibitor (``docs/architecture.md``, "Detached runs").

* Linux: ``systemd-inhibit --what=sleep:idle --mode=block``, holding a lock through
  logind for as long as its child runs.
* macOS: ``caffeinate -i`` (prevent idle sleep).

The child is tied to the process that holds the inhibitor: ``tail --pid=PID`` on Linux,
``caffeinate -w PID`` on macOS, so a ``kill -9`` of the holder releases the lock
within a second, and nothing is left behind. Where there is no inhibitor (another
platform, the program missing, no logind), ``KeepAwake`` says so once through its
``note`` callback and the run goes on.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable
from typing import Any

PROBE_TIMEOUT_SECONDS = 5.0


def inhibitor_argv(
    platform: str, pid: int, why: str, which: Callable[[str], str | None] = shutil.which
) -> tuple[str, ...] | None:
    """The command that holds the machine awake until ``pid`` exits, or None.

    Args:
        platform: ``sys.platform``.
        pid: The process whose life bounds the inhibitor.
        why: Shown by the platform's tools (``systemd-inhibit --list``).
        which: Finds an executable on PATH.
    """
    if platform.startswith("linux"):
        inhibit, tail = which("systemd-inhibit"), which("tail")
        if inhibit is None or tail is None:
            return None
        return (
            inhibit,
            "--what=sleep:idle",
            "--who=autopilot",
            f"--why={why}",
            "--mode=block",
            tail,
            f"--pid={pid}",
            "-f",
            "/dev/null",
        )
    if platform == "darwin":
        caffeinate = which("caffeinate")
        if caffeinate is None:
            return None
        return (caffeinate, "-i", "-w", str(pid))
    return None


SLEEP_WARNING = "the machine may sleep during this run:"
"""How the warning that the machine cannot be kept awake begins."""


def probe_argv(argv: tuple[str, ...]) -> tuple[str, ...] | None:
    """A quick command that fails where the inhibitor cannot work (no logind), or None
    when there is nothing to probe."""
    if os.path.basename(argv[0]) == "systemd-inhibit":
        return (argv[0], "--list", "--no-pager")
    return None


class KeepAwake:
    """Holds the platform's sleep inhibitor while asked to.

    Args:
        why: The reason shown by the platform (e.g. ``autopilot run <id>``).
        note: Called once, with one line, when the machine cannot be kept awake.
        argv: The inhibitor command (default: ``inhibitor_argv`` for this process).
    """

    def __init__(
        self,
        why: str,
        note: Callable[[str], Any],
        argv: tuple[str, ...] | None = None,
    ) -> None:
        self.argv = argv if argv is not None else inhibitor_argv(sys.platform, os.getpid(), why)
        self._note = note
        self._noted = False
        self._checked = False
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def held(self) -> bool:
        """True while the inhibitor runs."""
        return self._process is not None and self._process.poll() is None

    def _unavailable(self, why: str) -> None:
        if not self._noted:
            self._noted = True
            self._note(f"{SLEEP_WARNING} {why}")

    def _usable(self) -> bool:
        if self.argv is None:
            self._unavailable(
                f"no sleep inhibitor on {sys.platform} "
                "(systemd-inhibit on Linux, caffeinate on macOS)"
            )
            return False
        if self._checked:
            return not self._noted
        self._checked = True
        probe = probe_argv(self.argv)
        if probe is None:
            return True
        try:
            done = subprocess.run(
                probe,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=PROBE_TIMEOUT_SECONDS,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as error:
            self._unavailable(f"{os.path.basename(probe[0])} cannot run ({error})")
            return False
        if done.returncode != 0:
            detail = " ".join(done.stderr.decode("utf-8", "replace").split())[:200]
            self._unavailable(f"{os.path.basename(probe[0])} failed ({detail or done.returncode})")
            return False
        return True

    def hold(self) -> bool:
        """Hold the inhibitor (idempotent); returns whether it is held.

        Never raises: a machine that cannot be kept awake is said once through ``note``.
        """
        if self.held:
            return True
        if not self._usable():
            return False
        assert self.argv is not None
        try:
            self._process = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
        except OSError as error:
            self._unavailable(f"{os.path.basename(self.argv[0])} cannot run ({error})")
            return False
        return True

    def release(self) -> None:
        """Release the inhibitor if held (idempotent)."""
        process, self._process = self._process, None
        if process is None:
            return
        if process.poll() is None:
            try:
                os.killpg(process.pid, signal.SIGTERM)
            except OSError:
                pass
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except OSError:
                pass
            process.wait()
