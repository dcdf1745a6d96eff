"""autopilot hook install / uninstall: merged into the CLI's settings, only ours removed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from autopilot.core.vocabulary import HookAgent
from autopilot.errors import UsageError
from autopilot.hook.settings import (
    BACKUP_SUFFIX,
    Scope,
    hook_installed,
    install,
    is_ours,
    settings_path,
    slash_command_path,
    uninstall,
)

PROGRAM = "/opt/venv/bin/autopilot"
OTHERS = {
    "permissions": {"allow": ["Bash(git status)"]},
    "hooks": {
        "Stop": [{"hooks": [{"type": "command", "command": "/usr/local/bin/notify-done"}]}],
        "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "guard"}]}],
    },
}


def _json(path: Path) -> object:
    return json.loads(path.read_text())


@pytest.mark.parametrize("agent", list(HookAgent))
def test_install_merges_backs_up_and_is_idempotent(tmp_path: Path, agent: HookAgent) -> None:
    env: dict[str, str] = {}
    path = settings_path(agent, Scope.PROJECT, tmp_path, env)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(OTHERS))
    first = install(agent, Scope.PROJECT, tmp_path, PROGRAM, env)
    assert first[0].changed and first[0].backup == path.with_name(path.name + BACKUP_SUFFIX)
    assert _json(first[0].backup) == OTHERS
    settings = _json(path)
    assert isinstance(settings, dict)
    assert settings["permissions"] == OTHERS["permissions"]
    assert settings["hooks"]["PreToolUse"] == OTHERS["hooks"]["PreToolUse"]
    assert settings["hooks"]["Stop"] == [
        *OTHERS["hooks"]["Stop"],
        {"hooks": [{"type": "command", "command": f"{PROGRAM} hook {agent}-stop", "timeout": 600}]},
    ]
    written = path.read_bytes()
    second = install(agent, Scope.PROJECT, tmp_path, PROGRAM, env)
    assert [c.changed for c in second] == [False] * len(second)
    assert path.read_bytes() == written
    removed = uninstall(agent, Scope.PROJECT, tmp_path, env)
    assert removed[0].changed
    assert path.read_text() == json.dumps(OTHERS)  # as it was, byte for byte
    assert not path.with_name(path.name + BACKUP_SUFFIX).exists()
    again = uninstall(agent, Scope.PROJECT, tmp_path, env)
    assert [c.changed for c in again] == [False] * len(again)


def test_a_moved_installation_replaces_our_hook_only(tmp_path: Path) -> None:
    env: dict[str, str] = {}
    install(HookAgent.CLAUDE, Scope.PROJECT, tmp_path, "/old/bin/autopilot", env)
    install(HookAgent.CLAUDE, Scope.PROJECT, tmp_path, PROGRAM, env)
    settings = _json(tmp_path / ".claude" / "settings.json")
    assert isinstance(settings, dict)
    commands = [h["command"] for g in settings["hooks"]["Stop"] for h in g["hooks"]]
    assert commands == [f"{PROGRAM} hook claude-stop"]


def test_a_group_shared_with_another_hook_keeps_it(tmp_path: Path) -> None:
    path = tmp_path / ".codex" / "hooks.json"
    path.parent.mkdir()
    mine = {"type": "command", "command": f"{PROGRAM} hook codex-stop"}
    theirs = {"type": "command", "command": "say done"}
    path.write_text(json.dumps({"hooks": {"Stop": [{"hooks": [theirs, mine]}]}}))
    uninstall(HookAgent.CODEX, Scope.PROJECT, tmp_path, {})
    assert _json(path) == {"hooks": {"Stop": [{"hooks": [theirs]}]}}


def test_user_scope_follows_the_clis_own_variables(tmp_path: Path) -> None:
    env = {"CLAUDE_CONFIG_DIR": str(tmp_path / "cc"), "CODEX_HOME": str(tmp_path / "cx")}
    assert settings_path(HookAgent.CLAUDE, Scope.USER, tmp_path, env) == (
        tmp_path / "cc" / "settings.json"
    )
    assert settings_path(HookAgent.CODEX, Scope.USER, tmp_path, env) == (
        tmp_path / "cx" / "hooks.json"
    )
    install(HookAgent.CODEX, Scope.USER, tmp_path / "project", PROGRAM, env)
    assert (tmp_path / "cx" / "hooks.json").exists()
    assert not (tmp_path / "project").exists()


def test_claude_gets_the_slash_command_and_loses_only_ours(tmp_path: Path) -> None:
    install(HookAgent.CLAUDE, Scope.PROJECT, tmp_path, PROGRAM, {})
    command = slash_command_path(tmp_path / ".claude" / "settings.json")
    assert f"!`{PROGRAM} arm $ARGUMENTS`" in command.read_text()
    uninstall(HookAgent.CLAUDE, Scope.PROJECT, tmp_path, {})
    assert not command.exists()
    command.parent.mkdir(parents=True)
    command.write_text("my own /autopilot\n")
    with pytest.raises(UsageError, match="not autopilot's"):
        install(HookAgent.CLAUDE, Scope.PROJECT, tmp_path, PROGRAM, {})
    uninstall(HookAgent.CLAUDE, Scope.PROJECT, tmp_path, {})
    assert command.read_text() == "my own /autopilot\n"


@pytest.mark.parametrize(
    "text",
    ["{not json", "[1, 2]", '{"hooks": []}', '{"hooks": {"Stop": {}}}'],
)
def test_settings_we_cannot_read_are_refused_and_left_alone(tmp_path: Path, text: str) -> None:
    path = tmp_path / ".claude" / "settings.json"
    path.parent.mkdir()
    path.write_text(text)
    with pytest.raises(UsageError):
        install(HookAgent.CLAUDE, Scope.PROJECT, tmp_path, PROGRAM, {})
    assert path.read_text() == text
    assert not path.with_name(path.name + BACKUP_SUFFIX).exists()


@pytest.mark.parametrize(
    ("command", "ours"),
    [
        ("/opt/venv/bin/autopilot hook claude-stop", True),
        ("autopilot hook codex-stop", True),
        ("'/my dir/autopilot' hook claude-stop", True),
        ("/usr/bin/python3 -m autopilot hook claude-stop", True),
        ("/usr/local/bin/notify-done", False),
        ("not-autopilot hook claude-stop", False),
        ("autopilot hook claude-stop && rm -rf x", False),
        (None, False),
    ],
)
def test_our_hook_is_recognised_by_its_command(command: str | None, ours: bool) -> None:
    assert is_ours(command) is ours


def test_the_command_line_installs_and_says_where(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "autopilot", "hook", "install", "--agent", "codex"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"installed: {tmp_path / '.codex' / 'hooks.json'}\n"
    hooks = _json(tmp_path / ".codex" / "hooks.json")
    assert isinstance(hooks, dict)
    command = hooks["hooks"]["Stop"][0]["hooks"][0]["command"]
    assert command.endswith(" hook codex-stop") and is_ours(command)
    bad = subprocess.run(
        [sys.executable, "-m", "autopilot", "hook", "install", "--agent", "gemini"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert bad.returncode == 2 and len(bad.stderr.splitlines()) == 1


def test_the_command_line_uninstall_says_a_kept_file_lost_only_autopilots_entries(
    tmp_path: Path,
) -> None:
    settings = tmp_path / ".codex" / "hooks.json"
    settings.parent.mkdir()
    settings.write_text(json.dumps({"hooks": {"SessionStart": [{"hooks": []}]}}))

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "autopilot", "hook", *args, "--agent", "codex"]
        return subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, check=False)

    assert cli("install").returncode == 0
    done = cli("uninstall")
    assert done.returncode == 0, done.stderr
    [line] = done.stdout.splitlines()
    assert line == f"removed autopilot's entries from: {settings}"
    assert _json(settings) == {"hooks": {"SessionStart": [{"hooks": []}]}}


@pytest.mark.parametrize("agent", list(HookAgent))
def test_uninstall_removes_what_install_created_and_nothing_else(
    tmp_path: Path, agent: HookAgent
) -> None:
    install(agent, Scope.PROJECT, tmp_path, PROGRAM, {})
    uninstall(agent, Scope.PROJECT, tmp_path, {})
    assert list(tmp_path.iterdir()) == []  # no settings file, backup or folder left
    folder = settings_path(agent, Scope.PROJECT, tmp_path, {}).parent
    (folder / "commands").mkdir(parents=True)
    (folder / "commands" / "mine.md").write_text("mine\n")
    install(agent, Scope.PROJECT, tmp_path, PROGRAM, {})
    path = settings_path(agent, Scope.PROJECT, tmp_path, {})
    settings = _json(path)
    assert isinstance(settings, dict)
    path.write_text(json.dumps({**settings, "model": "theirs"}))  # changed since install
    uninstall(agent, Scope.PROJECT, tmp_path, {})
    assert _json(path) == {"model": "theirs"}
    assert sorted(p.name for p in folder.iterdir()) == ["commands", path.name]
    assert [p.name for p in (folder / "commands").iterdir()] == ["mine.md"]


def test_uninstall_in_user_scope_keeps_the_clis_folder(tmp_path: Path) -> None:
    env = {"CLAUDE_CONFIG_DIR": str(tmp_path / "cc")}
    install(HookAgent.CLAUDE, Scope.USER, tmp_path, PROGRAM, env)
    uninstall(HookAgent.CLAUDE, Scope.USER, tmp_path, env)
    assert list((tmp_path / "cc").iterdir()) == []


def test_hook_installed_looks_where_the_cli_reads_settings(tmp_path: Path) -> None:
    env = {"CLAUDE_CONFIG_DIR": str(tmp_path / "cc"), "CODEX_HOME": str(tmp_path / "cx")}
    project = tmp_path / "p"
    inner = project / "src" / "pkg"
    inner.mkdir(parents=True)
    assert not hook_installed(HookAgent.CLAUDE, inner, env)
    install(HookAgent.CLAUDE, Scope.PROJECT, project, PROGRAM, env)
    assert hook_installed(HookAgent.CLAUDE, inner, env)  # a folder above
    assert not hook_installed(HookAgent.CODEX, inner, env)
    install(HookAgent.CODEX, Scope.USER, project, PROGRAM, env)
    assert hook_installed(HookAgent.CODEX, inner, env)
    local = tmp_path / "q" / ".claude" / "settings.local.json"
    local.parent.mkdir(parents=True)
    hook = {"type": "command", "command": f"{PROGRAM} hook claude-stop"}
    local.write_text(json.dumps({"hooks": {"Stop": [{"hooks": [hook]}]}}))
    assert hook_installed(HookAgent.CLAUDE, tmp_path / "q", env)


def test_arm_without_the_hook_installed_says_so_in_one_line(tmp_path: Path) -> None:
    env = {**os.environ, "CLAUDE_CONFIG_DIR": str(tmp_path / "cc")}

    def arm(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "autopilot", *args],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )

    first = arm("arm", "-p", "go", "--session", "s1")
    assert first.returncode == 0 and "armed run" in first.stdout
    assert first.stderr.splitlines() == [
        "autopilot: warning: no autopilot Stop hook is installed for claude here or for your "
        "user, so no session continues this run: autopilot hook install (--scope user for "
        "every project)"
    ]
    assert arm("hook", "install").returncode == 0
    second = arm("arm", "-p", "go", "--session", "s2")
    assert (second.returncode, second.stderr) == (0, "")
