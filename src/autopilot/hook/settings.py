"""``autopilot hook install|uninstall``: autopilot's Stop hook in the CLI's own settings.

Files (docs/hooks.md; the shape is the same for both CLIs)::

    {"hooks": {"Stop": [{"hooks": [{"type": "command", "command": CMD, "timeout": N}]}]}}

- Claude Code: ``<project>/.claude/settings.json`` or ``~/.claude/settings.json``
  (``$CLAUDE_CONFIG_DIR/settings.json`` when set), plus the ``/autopilot`` slash command
  in ``commands/autopilot.md`` beside it.
- Codex: ``<project>/.codex/hooks.json`` or ``$CODEX_HOME/hooks.json`` (default
  ``~/.codex``).

Installing merges: every other key, hook and group is kept, a file that changes is
first copied to ``<name>.autopilot-backup``, and installing twice changes nothing.
Uninstalling removes what installing added and nothing else: autopilot's own hook
commands (recognised by their command line), the backup, a slash command file
autopilot wrote, and a settings file or folder installing created that is left empty.
"""

from __future__ import annotations

import contextlib
import json
import re
import shlex
import shutil
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from autopilot.core.vocabulary import HookAgent
from autopilot.errors import UsageError
from autopilot.store.atomic import write_atomically

HOOK_TIMEOUT_SECONDS = 600
"""Seconds the CLI gives the hook: an armed backlog run runs the item's checks in it."""
BACKUP_SUFFIX = ".autopilot-backup"
_OURS = re.compile(r"(?:^|[\s/'\"])autopilot['\"]?\s+hook\s+(?:claude|codex)-stop\s*$")
SLASH_COMMAND_MARK = "<!-- autopilot: installed by autopilot hook install -->"


class Scope(StrEnum):
    """Where the hook goes: this project, or every session of the user."""

    PROJECT = "project"
    USER = "user"


def settings_path(agent: HookAgent, scope: Scope, project: Path, environ: dict[str, str]) -> Path:
    """The settings file that holds the CLI's hooks for ``scope``."""
    if agent is HookAgent.CLAUDE:
        if scope is Scope.PROJECT:
            return project / ".claude" / "settings.json"
        config = environ.get("CLAUDE_CONFIG_DIR", "").strip()
        base = Path(config).expanduser() if config else Path.home() / ".claude"
        return base / "settings.json"
    if scope is Scope.PROJECT:
        return project / ".codex" / "hooks.json"
    home = environ.get("CODEX_HOME", "").strip()
    return (Path(home).expanduser() if home else Path.home() / ".codex") / "hooks.json"


def slash_command_path(settings: Path) -> Path:
    """Claude Code's ``/autopilot`` command file beside ``settings``."""
    return settings.parent / "commands" / "autopilot.md"


def hook_command(agent: HookAgent, program: str) -> str:
    """The hook's command line: ``<program> hook <agent>-stop`` (shell-quoted)."""
    return f"{program} hook {agent.value}-stop"


def is_ours(command: object) -> bool:
    """True for a hook command line autopilot installed."""
    return isinstance(command, str) and bool(_OURS.search(command))


def _stop_groups(settings: dict[str, Any], path: Path) -> list[Any]:
    hooks = settings.get("hooks", {})
    if not isinstance(hooks, dict):
        raise UsageError(f"{path}: 'hooks' is not an object; fix it by hand first")
    groups = hooks.get("Stop", [])
    if not isinstance(groups, list):
        raise UsageError(f"{path}: 'hooks.Stop' is not a list; fix it by hand first")
    return groups


def with_hook(settings: dict[str, Any], command: str, path: Path) -> dict[str, Any]:
    """``settings`` with autopilot's Stop hook running ``command`` (pure).

    An autopilot hook already there is kept if it runs ``command`` and replaced
    otherwise (a moved installation); nothing else changes.

    Raises:
        UsageError: ``hooks`` or ``hooks.Stop`` has a shape the CLI would not read.
    """
    groups = _stop_groups(settings, path)
    ours = {"type": "command", "command": command, "timeout": HOOK_TIMEOUT_SECONDS}
    installed = [
        hook
        for group in groups
        if isinstance(group, dict) and isinstance(group.get("hooks"), list)
        for hook in group["hooks"]
        if isinstance(hook, dict) and is_ours(hook.get("command"))
    ]
    if installed == [ours]:
        return settings
    kept = without_hook(settings, path)
    hooks = dict(kept.get("hooks", {}))
    hooks["Stop"] = [*hooks.get("Stop", []), {"hooks": [ours]}]
    return {**kept, "hooks": hooks}


def _count_ours(group: object) -> int:
    if not isinstance(group, dict) or not isinstance(group.get("hooks"), list):
        return 0
    return sum(1 for h in group["hooks"] if isinstance(h, dict) and is_ours(h.get("command")))


def without_hook(settings: dict[str, Any], path: Path) -> dict[str, Any]:
    """``settings`` with every autopilot Stop hook removed (pure); a group or list
    left empty by the removal goes too, anything else stays.

    Raises:
        UsageError: ``hooks`` or ``hooks.Stop`` has a shape the CLI would not read.
    """
    groups = _stop_groups(settings, path)
    if not any(_count_ours(group) for group in groups):
        return settings
    kept_groups = []
    for group in groups:
        if not _count_ours(group):
            kept_groups.append(group)
            continue
        rest = [
            h for h in group["hooks"] if not (isinstance(h, dict) and is_ours(h.get("command")))
        ]
        if rest:
            kept_groups.append({**group, "hooks": rest})
    hooks = dict(settings["hooks"])
    if kept_groups:
        hooks["Stop"] = kept_groups
    else:
        del hooks["Stop"]
    result = dict(settings)
    if hooks:
        result["hooks"] = hooks
    else:
        del result["hooks"]
    return result


def read_settings(path: Path) -> dict[str, Any]:
    """The settings object in ``path`` ({} when the file does not exist).

    Raises:
        UsageError: the file is not a JSON object (left untouched).
    """
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as error:
        raise UsageError(f"cannot read {path}: {error}") from None
    if not text.strip():
        return {}
    try:
        loaded = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as error:
        raise UsageError(f"{path} is not valid JSON ({error}); fix it by hand first") from None
    if not isinstance(loaded, dict):
        raise UsageError(f"{path} does not hold a JSON object; fix it by hand first")
    return loaded


def _write_atomically(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically, keeping the mode of a file already there
    (0644 for a new one)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = path.stat().st_mode & 0o777 if path.exists() else 0o644
    write_atomically(path, text.encode("utf-8"), mode=mode)


def _backup(path: Path) -> Path | None:
    if not path.exists():
        return None
    backup = path.with_name(path.name + BACKUP_SUFFIX)
    shutil.copy2(path, backup)
    return backup


@dataclass(frozen=True)
class Change:
    """What an install or uninstall did to one file.

    Attributes:
        path: The file.
        changed: False when it already was as asked.
        backup: Where the previous content was copied, if anything was there.
    """

    path: Path
    changed: bool
    backup: Path | None = None


def _apply(path: Path, before: dict[str, Any], after: dict[str, Any]) -> Change:
    if after == before and (path.exists() or not after):
        return Change(path, changed=False)
    backup = _backup(path)
    _write_atomically(path, json.dumps(after, indent=2, ensure_ascii=False) + "\n")
    return Change(path, changed=True, backup=backup)


def slash_command_text(program: str) -> str:
    """Claude Code's ``/autopilot`` command: it arms a run for this session."""
    return (
        "---\n"
        "description: Keep this session going with autopilot (autopilot arm)\n"
        'argument-hint: "-p PROMPT | -f FILE | --backlog [--max-iterations N] '
        '[--completion-promise TOKEN]"\n'
        "---\n"
        f"{SLASH_COMMAND_MARK}\n"
        f"!`{program} arm $ARGUMENTS`\n\n"
        "autopilot has armed a run for this session (its answer is above). If it says "
        "armed, start on the task it names now; each time you stop, autopilot gives "
        "you the next step. If it shows an error, tell the user and stop.\n"
    )


def install(
    agent: HookAgent, scope: Scope, project: Path, program: str, environ: dict[str, str]
) -> list[Change]:
    """Add autopilot's Stop hook (and Claude Code's ``/autopilot``) for ``scope``.

    Args:
        agent: The CLI.
        scope: This project, or the user's every session.
        project: The project directory (``scope`` project).
        program: How the hook calls autopilot (an absolute path, shell-quoted).
        environ: The environment (``CLAUDE_CONFIG_DIR``, ``CODEX_HOME``).

    Raises:
        UsageError: a settings file is not JSON or has a shape the CLI would not read.
        OSError: a file cannot be written.
    """
    path = settings_path(agent, scope, project, environ)
    before = read_settings(path)
    changes = [_apply(path, before, with_hook(before, hook_command(agent, program), path))]
    if agent is HookAgent.CLAUDE:
        command_file = slash_command_path(path)
        text = slash_command_text(program)
        current = command_file.read_text(encoding="utf-8") if command_file.exists() else None
        if current is not None and SLASH_COMMAND_MARK not in current:
            raise UsageError(f"{command_file} exists and is not autopilot's; move it first")
        if current != text:
            _write_atomically(command_file, text)
        changes.append(Change(command_file, changed=current != text))
    return changes


def uninstall(
    agent: HookAgent, scope: Scope, project: Path, environ: dict[str, str]
) -> list[Change]:
    """Remove what ``install`` added for ``scope``, and nothing else: autopilot's Stop
    hook (the file as it was before, byte for byte, when nothing else changed since;
    the file itself when install created it), install's backup, ``/autopilot`` and
    the folders install made that are left empty.

    Raises:
        UsageError: a settings file is not JSON or has a shape the CLI would not read.
        OSError: a file cannot be written.
    """
    path = settings_path(agent, scope, project, environ)
    before = read_settings(path)
    after = without_hook(before, path) if before else before
    changes = [_restore(path, before, after)]
    if agent is HookAgent.CLAUDE:
        command_file = slash_command_path(path)
        ours = command_file.exists() and SLASH_COMMAND_MARK in command_file.read_text("utf-8")
        if ours:
            command_file.unlink()
            _remove_if_empty(command_file.parent)
        changes.append(Change(command_file, changed=ours))
    if scope is Scope.PROJECT:
        _remove_if_empty(path.parent)
    return changes


def _restore(path: Path, before: dict[str, Any], after: dict[str, Any]) -> Change:
    """``path`` without autopilot's hook: install's backup put back when it holds just
    that, the file removed when nothing is left in it, else ``after`` written; the
    backup goes either way."""
    if after == before:
        return Change(path, changed=False)
    backup = path.with_name(path.name + BACKUP_SUFFIX)
    try:
        previous: dict[str, Any] | None = read_settings(backup) if backup.exists() else None
    except UsageError:
        previous = None
    if previous is not None and previous == after:
        backup.replace(path)  # the file as it was before install
        return Change(path, changed=True)
    if after:
        _write_atomically(path, json.dumps(after, indent=2, ensure_ascii=False) + "\n")
    else:
        path.unlink()  # install created it, or it held only autopilot's hook
    with contextlib.suppress(FileNotFoundError):
        backup.unlink()
    return Change(path, changed=True)


def _remove_if_empty(folder: Path) -> None:
    with contextlib.suppress(OSError):
        folder.rmdir()  # only an empty folder


def _has_our_hook(path: Path) -> bool:
    try:
        groups = _stop_groups(read_settings(path), path)
    except UsageError:
        return False
    return any(_count_ours(group) for group in groups)


def hook_installed(agent: HookAgent, project: Path, environ: dict[str, str]) -> bool:
    """True when autopilot's Stop hook is in a settings file the CLI reads for a session
    in ``project``: the user's, or a project's in ``project`` or a folder above it
    (Claude Code's ``settings.local.json`` too)."""
    candidates = [settings_path(agent, Scope.USER, project, environ)]
    for folder in (project, *project.parents):
        shared = settings_path(agent, Scope.PROJECT, folder, environ)
        candidates.append(shared)
        if agent is HookAgent.CLAUDE:
            candidates.append(shared.with_name("settings.local.json"))
    return any(_has_our_hook(path) for path in candidates)


def default_program(argv0: str, executable: str) -> str:
    """How the hook should call autopilot: the running ``autopilot`` script's
    absolute path, else ``autopilot`` on PATH, else ``<python> -m autopilot``."""
    candidate = Path(argv0)
    if candidate.name == "autopilot" and candidate.exists():
        return shlex.quote(str(candidate.absolute()))
    found = shutil.which("autopilot")
    if found:
        return shlex.quote(str(Path(found).absolute()))
    return f"{shlex.quote(executable)} -m autopilot"
