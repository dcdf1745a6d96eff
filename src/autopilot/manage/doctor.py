"""``autopilot doctor``: is this machine ready, and are its runs in order?

Checks, each giving ``ok``, ``note`` (worth knowing, not a fault) or ``fail``:

* the runs root resolves to a directory this user owns and can write;
* each agent CLI autopilot knows: found on PATH (or its ``AUTOPILOT_<NAME>_BIN``)
  and ``<cli> --version`` answers within a timeout (a CLI not installed is a note);
* git is installed;
* the settings (``AUTOPILOT_*``, the project's and the user's ``config.toml``) are
  valid, and which secret-looking environment variables (``*_API_KEY``,
  ``*_TOKEN``, ``*SECRET*``, a value shaped like a known key, …) an agent would
  inherit after ``env_exclude`` — names only, never values;
* runs whose driver is gone but which never terminated;
* ``index.jsonl`` agrees with the run folders;
* run worktrees whose run is gone, and (in a repository) run branches whose run is gone.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from autopilot.agents.environment import COMMON_ENV, NESTING_MARKERS, env_matches
from autopilot.agents.registry import AGENT_NAMES, make_adapter
from autopilot.config_sources import build_config
from autopilot.core.redact import has_secret_shape
from autopilot.core.vocabulary import HOOK_MODE
from autopilot.errors import RunsRootError, UsageError
from autopilot.manage.activity import Activity, run_activity
from autopilot.store.events import iter_event_lines
from autopilot.store.index import INDEX_FILE, read_index
from autopilot.store.paths import is_valid_run_id, list_run_ids, runs_root
from autopilot.store.rundir import RunDir
from autopilot.store.state import read_state_quietly
from autopilot.workspace.cleanup import find_strandings

VERSION_TIMEOUT_SECONDS = 10.0

AGENT_CLIS: tuple[tuple[str, str, str], ...] = (
    ("claude", "claude", "npm install -g @anthropic-ai/claude-code"),
    ("codex", "codex", "npm install -g @openai/codex"),
    ("pi", "pi", "npm install -g @mariozechner/pi-coding-agent"),
    ("gemini", "gemini", "npm install -g @google/gemini-cli"),
    ("copilot", "copilot", "npm install -g @github/copilot"),
    ("opencode", "opencode", "npm install -g opencode-ai"),
    ("aider", "aider", "pip install aider-chat"),
)
"""(name, default executable, how to install) for each agent CLI autopilot drives
(``agents.registry``)."""


class Level(StrEnum):
    """How a check came out."""

    OK = "ok"
    NOTE = "note"
    FAIL = "fail"


@dataclass(frozen=True)
class Finding:
    """One check's result: its level, what was checked, and what was found."""

    level: Level
    subject: str
    detail: str


def check_runs_root() -> list[Finding]:
    """The runs root exists (or can be made), is ours, and takes a file."""
    try:
        root = runs_root(create=False)
    except RunsRootError as error:
        return [Finding(Level.FAIL, "runs root", str(error))]
    if not root.exists():
        return [
            Finding(Level.NOTE, "runs root", f"{root} does not exist yet (made by the first run)")
        ]
    try:
        root = runs_root(create=True)
        fd, probe = tempfile.mkstemp(prefix=".doctor-", dir=root)
        os.close(fd)
        os.unlink(probe)
    except (RunsRootError, OSError) as error:
        detail = error.strerror if isinstance(error, OSError) else str(error)
        return [Finding(Level.FAIL, "runs root", f"{root} is not writable: {detail}")]
    return [Finding(Level.OK, "runs root", f"{root} (writable)")]


def program_version(
    executable: str, timeout_seconds: float = VERSION_TIMEOUT_SECONDS
) -> tuple[bool, str]:
    """Run ``<executable> --version``; returns (answered, first line or the error).

    Nesting markers (e.g. ``CLAUDECODE``) are removed from its environment, stdin
    is ``/dev/null``, and it is ended after ``timeout_seconds``.
    """
    env = {k: v for k, v in os.environ.items() if k not in NESTING_MARKERS}
    try:
        proc = subprocess.Popen(
            [executable, "--version"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            start_new_session=True,
        )
    except OSError as error:
        return False, f"`{executable} --version` could not start: {error.strerror or error}"
    try:
        stdout, stderr = proc.communicate(timeout=timeout_seconds)
    except subprocess.TimeoutExpired:
        # Its whole group: a wrapper script's children would hold the pipes open.
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return False, f"`{executable} --version` gave no answer in {timeout_seconds:g} s"
    done = subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)
    text = (done.stdout or done.stderr).decode("utf-8", "replace").strip()
    first = text.splitlines()[0].strip() if text else ""
    if done.returncode != 0:
        return False, f"`{executable} --version` exited {done.returncode}: {first or 'no output'}"
    return True, first or "(no version printed)"


def check_agents(
    environ: Mapping[str, str] | None = None, timeout_seconds: float = VERSION_TIMEOUT_SECONDS
) -> list[Finding]:
    """Each known agent CLI: its path and version, or a note that it is not installed."""
    environ = os.environ if environ is None else environ
    findings = []
    for name, default, install in AGENT_CLIS:
        program = environ.get(f"AUTOPILOT_{name.upper()}_BIN") or default
        found = shutil.which(program, path=environ.get("PATH"))
        if found is None:
            findings.append(Finding(Level.NOTE, f"agent {name}", f"not installed ({install})"))
            continue
        answered, text = program_version(found, timeout_seconds)
        level = Level.OK if answered else Level.FAIL
        findings.append(Finding(level, f"agent {name}", f"{found}: {text}"))
    return findings


def check_git(timeout_seconds: float = VERSION_TIMEOUT_SECONDS) -> list[Finding]:
    """git is needed for progress detection, commits and checkpoints."""
    found = shutil.which("git")
    if found is None:
        return [Finding(Level.FAIL, "git", "not found on PATH (install git)")]
    answered, text = program_version(found, timeout_seconds)
    return [Finding(Level.OK if answered else Level.FAIL, "git", text)]


_SECRET_NAME = re.compile(
    r"(?:^|_)(?:API_?)?KEY(?:_|$)|(?:^|_)TOKEN(?:_|$)|SECRET|PASSW(?:OR)?D|CREDENTIAL|(?:^|_)PAT$",
    re.IGNORECASE,
)
"""Names that say a variable holds a secret (``MAX_TOKENS`` does not)."""


def secret_looking(name: str, value: str) -> bool:
    """Whether an environment variable looks like it holds a secret, by name or value."""
    if env_matches(name, COMMON_ENV):
        return False
    return bool(_SECRET_NAME.search(name)) or has_secret_shape(value)


def check_environment(
    environ: Mapping[str, str] | None = None,
    exclude: Sequence[str] | None = None,
    project: Path | None = None,
) -> list[Finding]:
    """Secret-looking variables each agent would inherit, after ``env_exclude``.

    Args:
        environ: The environment (default ``os.environ``).
        exclude: The ``env_exclude`` globs (default: from the settings that apply
            in ``project``, as ``autopilot run`` would read them).
        project: The project directory (default the current one).

    Returns:
        One finding per secret-looking variable that reaches an agent: a note when
        it reaches agents whose CLI does not read it, ok when only those that do;
        a failure when the settings are invalid.
    """
    environ = os.environ if environ is None else environ
    if exclude is None:
        try:
            exclude = build_config({}, project=project or Path.cwd(), environ=environ).env_exclude
        except UsageError as error:
            return [Finding(Level.FAIL, "settings", str(error))]
    needs = {
        name: make_adapter(name, command=("true",)).env_needed
        for name in AGENT_NAMES
        if name != "demo"
    }
    findings = []
    for var in sorted(environ):
        if var in NESTING_MARKERS or not secret_looking(var, environ[var]):
            continue
        readers = [name for name, needed in needs.items() if env_matches(var, needed)]
        dropped = bool(exclude) and env_matches(var, exclude)
        reaches = readers if dropped else list(needs)
        if not reaches:
            continue
        if set(reaches) <= set(readers):
            findings.append(
                Finding(Level.OK, "environment", f"{var} reaches only {', '.join(reaches)}")
            )
            continue
        read = f" ({', '.join(readers)} read it)" if readers else ""
        findings.append(
            Finding(
                Level.NOTE,
                "environment",
                f"{var} reaches every agent{read}; drop it from the others with "
                f"--env-exclude {var} or env_exclude in config.toml",
            )
        )
    if not findings:
        findings.append(
            Finding(Level.OK, "environment", "no secret-looking variable reaches an agent")
        )
    return findings


def check_runs(root: Path) -> list[Finding]:
    """Runs whose driver is gone although they never terminated, and unreadable runs."""
    findings = []
    counts: Counter[Activity] = Counter()
    for run_id in list_run_ids(root):
        folder = root / run_id
        state = read_state_quietly(RunDir(folder).state)
        if state is None:
            findings.append(
                Finding(
                    Level.FAIL,
                    f"run {run_id}",
                    "state.json is unreadable; `autopilot doctor --repair` rebuilds it from "
                    "its event log",
                )
            )
            continue
        activity = run_activity(folder, state)
        counts[activity] += 1
        if state.mode == HOOK_MODE and activity is not Activity.ENDED:
            from autopilot.hook.status import hook_health

            healthy, words = hook_health(folder, state.iteration, int(time.time() * 1000))
            findings.append(Finding(Level.NOTE if healthy else Level.FAIL, f"run {run_id}", words))
        elif activity is Activity.GONE:
            findings.append(
                Finding(
                    Level.FAIL,
                    f"run {run_id}",
                    f"driver gone (pid {state.pid}) but the run never terminated; "
                    f"`autopilot start {run_id}` relaunches it, `autopilot stop {run_id}` ends it",
                )
            )
        elif activity is Activity.UNKNOWN:
            findings.append(
                Finding(Level.NOTE, f"run {run_id}", "not terminated; its driver cannot be checked")
            )
    summary = ", ".join(f"{count} {activity.value}" for activity, count in counts.most_common())
    findings.insert(0, Finding(Level.OK, "runs", summary or "none yet"))
    return findings


def check_index(root: Path) -> list[Finding]:
    """``index.jsonl`` has one well-formed row per run folder, and no others."""
    path = root / INDEX_FILE
    malformed = 0
    try:
        with path.open("rb") as stream:
            for raw in iter_event_lines(stream, hold_back_partial=False):
                if raw.strip() and not _is_row(raw):
                    malformed += 1
    except FileNotFoundError:
        pass
    except OSError as error:
        return [Finding(Level.FAIL, "index", f"cannot read {path}: {error.strerror or error}")]
    rows = Counter(str(row["runId"]) for row in read_index(root))
    folders = {
        entry.name
        for entry in (os.scandir(root) if root.is_dir() else ())
        if entry.is_dir(follow_symlinks=False) and is_valid_run_id(entry.name)
    }
    findings = []
    orphans = sorted(set(rows) - folders)
    unlisted = sorted(folders - set(rows))
    duplicates = sorted(run_id for run_id, count in rows.items() if count > 1)
    for problem, ids in (
        ("rows with no run folder (`autopilot prune` drops them once old)", orphans),
        ("run folders missing from index.jsonl (list and stats do not see them)", unlisted),
        ("runs listed more than once", duplicates),
    ):
        if ids:
            shown = ", ".join(ids[:3]) + (", …" if len(ids) > 3 else "")
            findings.append(Finding(Level.FAIL, "index", f"{len(ids)} {problem}: {shown}"))
    if malformed:
        findings.append(Finding(Level.NOTE, "index", f"{malformed} malformed lines (skipped)"))
    if not findings:
        findings.append(Finding(Level.OK, "index", f"{len(rows)} rows match the run folders"))
    return findings


def _is_row(raw: bytes) -> bool:
    try:
        row = json.loads(raw)
    except (ValueError, RecursionError):
        return False
    return isinstance(row, dict) and row.get("type") == "armed" and bool(row.get("runId"))


def run_doctor(timeout_seconds: float = VERSION_TIMEOUT_SECONDS) -> list[Finding]:
    """Every check, in order; the run checks only when the runs root is usable."""
    findings = check_runs_root()
    findings += check_agents(timeout_seconds=timeout_seconds)
    findings += check_git(timeout_seconds)
    findings += check_environment()
    if findings[0].level is Level.OK:
        root = runs_root(create=False)
        findings += check_runs(root)
        findings += check_index(root)
        findings += check_worktrees(root, Path.cwd())
    return findings


def check_worktrees(root: Path, here: Path) -> list[Finding]:
    """Run worktrees left without their run, and (in a repository) run branches and
    worktrees whose run or folder is gone."""
    found = find_strandings(root, here)
    findings = [Finding(Level.FAIL, "worktrees", line) for line in found.faults]
    findings += [Finding(Level.NOTE, "worktrees", line) for line in found.notes]
    return findings
