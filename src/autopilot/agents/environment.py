"""The environment an agent CLI runs with.

The driver's environment, less the variables that make a CLI behave as a nested
session, less what the run's ``env_exclude`` globs drop (never what the CLI itself
reads, its adapter's ``env_needed``, nor what any program needs, ``COMMON_ENV``),
plus the run's own variables and the invocation's.
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from autopilot.agents.base import Invocation

NESTING_MARKERS: tuple[str, ...] = (
    "CLAUDECODE",
    "CLAUDE_CODE_ENTRYPOINT",
    "CLAUDE_CODE_SSE_PORT",
    "CODEX_SANDBOX",
    "CODEX_SANDBOX_NETWORK_DISABLED",
    "CODEX_THREAD_ID",
    "GEMINI_CLI",
    "OPENCODE",
    "OPENCODE_PID",
)
"""Variables that make an agent refuse to start, or behave as a nested session,
when the driver itself runs inside an agent (as when autopilot is started from a
Claude Code session). Removed from every agent's environment."""

COMMON_ENV: tuple[str, ...] = (
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "PWD",
    "LANG",
    "LANGUAGE",
    "LC_*",
    "TERM",
    "COLORTERM",
    "TZ",
    "TMPDIR",
    "TMP",
    "TEMP",
    "XDG_*",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "NODE_EXTRA_CA_CERTS",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "no_proxy",
    "all_proxy",
)
"""Variables every agent keeps whatever ``env_exclude`` says (globs): what any program
needs to run, find its files, speak the user's language, trust certificates and
reach the network through a proxy."""


def env_matches(name: str, patterns: Sequence[str]) -> bool:
    """Whether a variable ``name`` matches one of the glob ``patterns`` (case-sensitive)."""
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in patterns)


def missing_agent_env(
    recorded: Sequence[str] | None, environ: Mapping[str, str]
) -> tuple[str, ...]:
    """The agent's variables a run started with (``agentEnv``: names, never values)
    that ``environ`` lacks, sorted: a relaunch from that environment would start an
    agent without them (e.g. without ``ANTHROPIC_API_KEY``: "Not logged in")."""
    return tuple(sorted(set(recorded or ()) - set(environ)))


def agent_environment(
    base: Mapping[str, str],
    invocation: Invocation,
    extra: Mapping[str, str],
    *,
    needed: Sequence[str] = (),
    exclude: Sequence[str] = (),
) -> dict[str, str]:
    """The child's environment.

    ``base`` less the nesting markers, less every variable an ``exclude`` glob
    matches unless the agent needs it (its ``needed`` globs, or ``COMMON_ENV``);
    then ``extra`` (the run's own variables) and the invocation's changes.

    Args:
        base: The environment the agent would inherit (the driver's).
        invocation: The adapter's invocation (``env_set``, ``env_unset``).
        extra: Variables autopilot sets for the agent (``AUTOPILOT_RUN_ID``, …).
        needed: The adapter's ``env_needed`` globs.
        exclude: The run's ``env_exclude`` globs.
    """
    env = {
        k: v
        for k, v in base.items()
        if k not in NESTING_MARKERS
        and not (
            exclude
            and env_matches(k, exclude)
            and not env_matches(k, needed)
            and not env_matches(k, COMMON_ENV)
        )
    }
    for key in invocation.env_unset:
        env.pop(key, None)
    env.update(extra)
    env.update(invocation.env_set)
    return env


def with_autopilot_on_path(
    environ: Mapping[str, str], scripts_dir: Path | Callable[[], Path]
) -> dict[str, str]:
    """``environ`` with ``scripts_dir`` appended to its ``PATH`` when no ``autopilot`` is
    found on that ``PATH`` and ``scripts_dir`` holds one.

    A backlog run's agent reports its decision with ``autopilot report``; started as
    ``.venv/bin/autopilot`` from a shell whose ``PATH`` lacks the venv, the agent would
    get "command not found" and its item would be blocked for want of a report. The
    directory is appended, never put first, so the agent's own ``python`` and tools
    stay the ones its ``PATH`` names. ``scripts_dir`` is where this interpreter's
    console scripts are (``sysconfig.get_path("scripts")``), or the function that
    finds it (called only when no ``autopilot`` is on ``PATH``).
    """
    found = dict(environ)
    path = found.get("PATH", os.defpath)
    on_path = (Path(folder or ".") for folder in path.split(os.pathsep))
    if any(_runnable(folder / "autopilot") for folder in on_path):
        return found
    if callable(scripts_dir):
        scripts_dir = scripts_dir()
    if not _runnable(scripts_dir / "autopilot"):
        return found
    found["PATH"] = f"{path}{os.pathsep}{scripts_dir}" if path else str(scripts_dir)
    return found


def _runnable(path: Path) -> bool:
    """A file this user may execute (what ``shutil.which`` looks for; ``shutil`` is
    not loaded for it: it brings its archive modules to every driver)."""
    return path.is_file() and os.access(path, os.X_OK)
