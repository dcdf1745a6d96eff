"""The agent's environment: what each CLI needs stays, ``env_exclude`` drops the rest,
and ``doctor`` names the secret-looking variables that still reach an agent."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from autopilot.agents.base import Invocation
from autopilot.agents.environment import agent_environment, with_autopilot_on_path
from autopilot.agents.registry import make_adapter
from autopilot.config import RunConfig
from autopilot.config_sources import build_config
from autopilot.errors import UsageError
from autopilot.manage.doctor import Level, check_environment
from tests.conftest import FakeAgent, run_cli

BASE = {
    "PATH": "/usr/bin",
    "HOME": "/home/u",
    "LC_ALL": "C.UTF-8",
    "ANTHROPIC_API_KEY": "a",
    "OPENAI_API_KEY": "o",
    "AWS_SECRET_ACCESS_KEY": "s",
    "GITHUB_TOKEN": "g",
    "CLAUDECODE": "1",
}


def _env(agent: str, exclude: tuple[str, ...]) -> dict[str, str]:
    adapter = make_adapter(agent, command=("true",))
    invocation = Invocation(argv=["x"], env_set={"SET_BY_ADAPTER": "1"})
    return agent_environment(
        BASE, invocation, {"AUTOPILOT_RUN_ID": "r-1"}, needed=adapter.env_needed, exclude=exclude
    )


def test_without_env_exclude_the_agent_inherits_everything_but_nesting_markers() -> None:
    env = _env("claude", ())
    assert set(env) == {*BASE, "SET_BY_ADAPTER", "AUTOPILOT_RUN_ID"} - {"CLAUDECODE"}


def test_env_exclude_keeps_what_the_cli_needs_and_what_every_program_needs() -> None:
    assert set(_env("claude", ("*",))) == {
        "PATH",
        "HOME",
        "LC_ALL",
        "ANTHROPIC_API_KEY",
        "SET_BY_ADAPTER",
        "AUTOPILOT_RUN_ID",
    }
    assert "OPENAI_API_KEY" in _env("codex", ("*_KEY",))
    assert "ANTHROPIC_API_KEY" not in _env("codex", ("*_KEY",))
    assert "GITHUB_TOKEN" in _env("copilot", ("GITHUB_*",))
    command = _env("command", ("AWS_*", "GITHUB_TOKEN"))
    assert "AWS_SECRET_ACCESS_KEY" not in command and "GITHUB_TOKEN" not in command
    assert "OPENAI_API_KEY" in command


def test_env_exclude_from_every_layer_adds_up(tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / ".autopilot").mkdir(parents=True)
    (project / ".autopilot" / "config.toml").write_text('env_exclude = ["GITHUB_*"]\n')
    user = tmp_path / "user.toml"
    user.write_text('env_exclude = "AWS_*"\n')
    config = build_config(
        {"env-exclude": "NPM_TOKEN,*_SECRET"},
        project=project,
        environ={"AUTOPILOT_ENV_EXCLUDE": "STRIPE_*"},
        user_config=user,
    )
    assert config.env_exclude == ("NPM_TOKEN", "*_SECRET", "STRIPE_*", "GITHUB_*", "AWS_*")
    assert RunConfig.from_json(config.to_json()) == config


@pytest.mark.parametrize("bad", ["A=B", "two words;", "$(id)", "é*"])
def test_a_bad_pattern_is_a_usage_error_naming_it(tmp_path: Path, bad: str) -> None:
    with pytest.raises(UsageError, match="--env-exclude"):
        build_config({"env-exclude": bad}, project=tmp_path, environ={})


def test_run_with_env_exclude_drops_the_variables(
    tmp_path: Path, repo: Path, fake_agent: FakeAgent
) -> None:
    env = fake_agent([[{"shell": "env > ../agent-env.txt"}, {"result": "COMPLETE"}]])
    extra = {"MY_DEPLOY_TOKEN": "t0k3n", "ANTHROPIC_API_KEY": "dummy", "AWS_PROFILE": "p"}
    done = run_cli(
        ["run", "-p", "x", "--env-exclude", "MY_*", "--env-exclude=AWS_*,ANTHROPIC_*"],
        cwd=repo,
        env={**env, **extra},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    names = {
        line.split("=", 1)[0] for line in (repo.parent / "agent-env.txt").read_text().splitlines()
    }
    assert "MY_DEPLOY_TOKEN" not in names and "AWS_PROFILE" not in names
    assert {"ANTHROPIC_API_KEY", "PATH", "FAKE_AGENT_SCRIPT", "AUTOPILOT_RUN_ID"} <= names
    assert "agent environment without MY_*, AWS_*, ANTHROPIC_*" in done.stdout


def test_doctor_names_secret_looking_variables_never_values(tmp_path: Path) -> None:
    environ = {
        "PATH": "/usr/bin",
        "MAX_TOKENS": "5",
        "ANTHROPIC_API_KEY": "hunter2-value",
        "GITHUB_TOKEN": "g",
        "INNOCENT": "ghp_" + "a1B2" * 9,
    }
    findings = check_environment(environ, exclude=("GITHUB_*",), project=tmp_path)
    details = {f.detail.split()[0]: f for f in findings}
    assert set(details) == {"ANTHROPIC_API_KEY", "GITHUB_TOKEN", "INNOCENT"}
    assert details["ANTHROPIC_API_KEY"].level is Level.NOTE
    assert "claude" in details["ANTHROPIC_API_KEY"].detail
    assert details["GITHUB_TOKEN"].level is Level.OK
    assert details["GITHUB_TOKEN"].detail == "GITHUB_TOKEN reaches only copilot"
    assert details["INNOCENT"].level is Level.NOTE
    assert not any("hunter2" in f.detail or "a1B2" in f.detail for f in findings)


def test_doctor_reports_bad_settings(tmp_path: Path) -> None:
    findings = check_environment({"AUTOPILOT_ENV_EXCLUDE": "A=B"}, project=tmp_path)
    assert [(f.level, f.subject) for f in findings] == [(Level.FAIL, "settings")]


def _script(folder: Path, name: str = "autopilot") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / name
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    return folder


def test_autopilot_outside_the_agents_path_is_appended_to_it(tmp_path: Path) -> None:
    scripts = _script(tmp_path / "venv" / "bin")
    env = with_autopilot_on_path({"PATH": "/usr/bin:/bin", "HOME": "/h"}, scripts)
    # Last, so the agent's own python and tools stay the ones its PATH names first.
    assert env == {"PATH": f"/usr/bin:/bin:{scripts}", "HOME": "/h"}


def test_an_autopilot_already_on_the_path_is_left_as_it_is(tmp_path: Path) -> None:
    scripts = _script(tmp_path / "venv" / "bin")
    on_path = _script(tmp_path / "global")
    env = with_autopilot_on_path({"PATH": f"/usr/bin:{on_path}"}, scripts)
    assert env == {"PATH": f"/usr/bin:{on_path}"}


def test_the_scripts_folder_is_looked_up_only_when_no_autopilot_is_on_the_path(
    tmp_path: Path,
) -> None:
    scripts = _script(tmp_path / "venv" / "bin")
    on_path = _script(tmp_path / "global")
    asked: list[bool] = []

    def lookup() -> Path:
        asked.append(True)
        return scripts

    assert with_autopilot_on_path({"PATH": str(on_path)}, lookup) == {"PATH": str(on_path)}
    assert asked == []
    assert with_autopilot_on_path({"PATH": "/usr/bin"}, lookup) == {"PATH": f"/usr/bin:{scripts}"}
    assert asked == [True]


def test_a_scripts_folder_with_no_autopilot_is_not_added(tmp_path: Path) -> None:
    scripts = _script(tmp_path / "bin", name="python")
    assert with_autopilot_on_path({"PATH": "/usr/bin"}, scripts) == {"PATH": "/usr/bin"}


def test_an_agent_started_without_the_venv_on_path_can_run_autopilot_report(
    tmp_path: Path,
) -> None:
    """The run's agent gets an ``autopilot`` on its PATH when its driver was started as
    ``.venv/bin/autopilot`` from a shell without the venv (backlog runs' reports)."""
    agent = tmp_path / "agent.sh"
    agent.write_text('#!/bin/sh\ncommand -v autopilot > "$1"\n')
    agent.chmod(0o755)
    found = tmp_path / "found.txt"
    result = run_cli(
        [
            "run",
            "-p",
            "x",
            "--max-iterations",
            "1",
            "--agent",
            "command",
            "--",
            str(agent),
            str(found),
        ],
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin"},
    )
    assert found.exists(), result.stdout + result.stderr  # the agent ran
    assert found.read_text().strip() == str(Path(sys.executable).parent / "autopilot")


def test_the_scripts_folder_is_the_started_scripts_else_the_interpreters(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The ``autopilot`` a person ran by its path is the one an agent gets; started
    any other way (``python -m autopilot``), the one beside the interpreter, else the
    interpreter's scripts folder."""
    import sysconfig

    from autopilot.loop.launch import _scripts_dir

    monkeypatch.setattr(sys, "argv", ["/opt/tools/venv/bin/autopilot", "run"])
    assert _scripts_dir() == Path("/opt/tools/venv/bin")
    venv = tmp_path / "venv" / "bin"
    venv.mkdir(parents=True)
    monkeypatch.setattr(sys, "executable", str(venv / "python"))
    interpreters = Path(sysconfig.get_path("scripts"))
    for started in ("/src/autopilot/__main__.py", "autopilot", "bin/autopilot"):
        monkeypatch.setattr(sys, "argv", [started, "run"])
        assert _scripts_dir() == interpreters  # no autopilot beside the interpreter
    script = venv / "autopilot"
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    assert _scripts_dir() == venv
