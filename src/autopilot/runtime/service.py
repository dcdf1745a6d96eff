"""``autopilot service``: relaunch runs left active when the user logs in, so a reboot
does not need a person (bare ``autopilot`` relaunches them too, but someone must type it).

* Linux: a systemd user unit, ``~/.config/systemd/user/autopilot-relaunch.service``
  (``Type=oneshot``, ``KillMode=process`` so the runs it starts outlive it), enabled
  with ``systemctl --user enable``; see systemd.service(5) and systemd.kill(5).
* macOS: a launchd agent, ``~/Library/LaunchAgents/dev.autopilot.relaunch.plist``
  (``RunAtLoad``, ``AbandonProcessGroup``), loaded with ``launchctl bootstrap``; see
  launchd.plist(5).

Both run ``<python> -m autopilot relaunch --all`` with the ``PATH`` and ``AUTOPILOT_*``
locations of the shell that installed them (a login service starts with a bare
environment, where agent CLIs would not be found). What is written and run is decided
by pure functions here; ``install``/``uninstall`` act.
"""

from __future__ import annotations

import os
import plistlib
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from autopilot.errors import UsageError

UNIT_NAME = "autopilot-relaunch.service"
LAUNCHD_LABEL = "dev.autopilot.relaunch"
_KEPT_VARIABLES = ("PATH", "AUTOPILOT_RUNS_DIR")


def relaunch_command(python: str = sys.executable) -> tuple[str, ...]:
    """What the service runs: bare ``autopilot``'s relaunch, for every project."""
    return (python, "-m", "autopilot", "relaunch", "--all")


def service_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """The variables a login service needs from the installing shell: ``PATH``,
    ``AUTOPILOT_RUNS_DIR`` and ``AUTOPILOT_<AGENT>_BIN`` (never anything else, so no
    secret from the environment lands in a file)."""
    return {
        key: value
        for key, value in sorted(environ.items())
        if key in _KEPT_VARIABLES or (key.startswith("AUTOPILOT_") and key.endswith("_BIN"))
    }


def _systemd_quote(word: str) -> str:
    """One word of a unit file's command line or assignment (systemd.syntax(7))."""
    escaped = word.replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%")
    return f'"{escaped}"'


def systemd_unit(command: Sequence[str], environment: Mapping[str, str]) -> str:
    """The text of the systemd user unit that runs ``command`` at login."""
    lines = [
        "[Unit]",
        "Description=autopilot: relaunch runs left active (autopilot relaunch --all)",
        "",
        "[Service]",
        "Type=oneshot",
        "KillMode=process",
        "ExecStart=" + " ".join(_systemd_quote(word) for word in command),
    ]
    lines += [f"Environment={_systemd_quote(f'{k}={v}')}" for k, v in environment.items()]
    lines += ["", "[Install]", "WantedBy=default.target", ""]
    return "\n".join(lines)


def launchd_plist(command: Sequence[str], environment: Mapping[str, str], log: Path) -> bytes:
    """The launchd agent (an XML property list) that runs ``command`` at login."""
    return plistlib.dumps(
        {
            "Label": LAUNCHD_LABEL,
            "ProgramArguments": list(command),
            "RunAtLoad": True,
            "AbandonProcessGroup": True,
            "EnvironmentVariables": dict(environment),
            "StandardOutPath": str(log),
            "StandardErrorPath": str(log),
        }
    )


@dataclass(frozen=True)
class ServicePlan:
    """What ``service install`` writes and runs on this platform.

    Attributes:
        path: The unit or agent file.
        content: Its bytes.
        enable: Commands that register it (run in order; a failure is reported).
        disable: Commands that unregister it, before the file is removed.
        check: A command whose output says whether it is registered.
    """

    path: Path
    content: bytes
    enable: tuple[tuple[str, ...], ...]
    disable: tuple[tuple[str, ...], ...]
    check: tuple[str, ...]


def plan_service(
    platform: str,
    home: Path,
    environ: Mapping[str, str],
    command: Sequence[str] | None = None,
    uid: int | None = None,
) -> ServicePlan:
    """The service for ``platform`` (``sys.platform``).

    Args:
        platform: ``linux`` or ``darwin``.
        home: The user's home folder.
        environ: The installing shell's environment (``XDG_CONFIG_HOME`` is honoured).
        command: What the service runs (default ``relaunch_command()``).
        uid: The user id, for launchd's ``gui/<uid>`` domain.

    Raises:
        UsageError: the platform has neither systemd nor launchd.
    """
    command = tuple(command or relaunch_command())
    environment = service_environment(environ)
    if platform.startswith("linux"):
        config = Path(environ.get("XDG_CONFIG_HOME") or home / ".config")
        return ServicePlan(
            path=config / "systemd" / "user" / UNIT_NAME,
            content=systemd_unit(command, environment).encode(),
            enable=(
                ("systemctl", "--user", "daemon-reload"),
                ("systemctl", "--user", "enable", UNIT_NAME),
            ),
            disable=(("systemctl", "--user", "disable", UNIT_NAME),),
            check=("systemctl", "--user", "is-enabled", UNIT_NAME),
        )
    if platform == "darwin":
        domain = f"gui/{uid if uid is not None else os.getuid()}"
        path = home / "Library" / "LaunchAgents" / f"{LAUNCHD_LABEL}.plist"
        log = home / "Library" / "Logs" / "autopilot-relaunch.log"
        return ServicePlan(
            path=path,
            content=launchd_plist(command, environment, log),
            enable=(("launchctl", "bootstrap", domain, str(path)),),
            disable=(("launchctl", "bootout", f"{domain}/{LAUNCHD_LABEL}"),),
            check=("launchctl", "print", f"{domain}/{LAUNCHD_LABEL}"),
        )
    raise UsageError(f"autopilot service needs systemd (Linux) or launchd (macOS), not {platform}")


Runner = Callable[[Sequence[str]], tuple[int, str]]
"""Runs a command; returns its exit code and its output (stdout and stderr)."""


def run_command(argv: Sequence[str]) -> tuple[int, str]:
    """The real ``Runner``: a missing program is exit 127."""
    try:
        done = subprocess.run(
            list(argv),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        return 127, str(error)
    return done.returncode, (done.stdout + done.stderr).strip()


def install(plan: ServicePlan, runner: Runner = run_command) -> list[str]:
    """Write the service file and register it.

    Returns:
        One line per registration step that failed (empty when all went well); the
        file is written either way, so the user can register it by hand.

    Raises:
        OSError: the file cannot be written.
    """
    plan.path.parent.mkdir(parents=True, exist_ok=True)
    plan.path.write_bytes(plan.content)
    problems = []
    for argv in plan.enable:
        code, output = runner(argv)
        if code != 0:
            problems.append(f"{' '.join(argv)} failed ({code}): {' '.join(output.split())[:200]}")
    return problems


def uninstall(plan: ServicePlan, runner: Runner = run_command) -> bool:
    """Unregister the service and remove its file; returns whether a file was removed.

    Raises:
        OSError: the file cannot be removed.
    """
    if not plan.path.exists():
        return False
    for argv in plan.disable:
        runner(argv)  # best effort: an unregistered service is what we want anyway
    plan.path.unlink()
    return True


def status(plan: ServicePlan, runner: Runner = run_command) -> tuple[bool, str]:
    """Whether the service file is installed, and what the platform says of it."""
    if not plan.path.exists():
        return False, "not installed"
    code, output = runner(plan.check)
    said = " ".join(output.split())[:200] or f"exit {code}"
    return True, said
