"""Files a repository (or an agent) can plant where autopilot reads: its config, the
user's config and prompt files are read only as bounded regular files."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.cli.test_bad_input import _assert_one_line_error
from tests.cli.test_control import _events, _run_dir
from tests.conftest import FakeAgent, run_cli

CONFIG = Path(".autopilot") / "config.toml"


def _plant(path: Path, kind: str, outside: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "dev-zero":
        path.symlink_to("/dev/zero")
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "huge":
        with path.open("wb") as handle:
            handle.truncate(64 * 1024 * 1024)  # sparse: no disk used
    elif kind == "outside":
        outside.write_text('label = "stolen"\n')
        path.symlink_to(outside)


_PLANTED = {
    "dev-zero": "is a symlink leading out of",
    "fifo": "is a FIFO, not a regular file",
    "huge": "is larger than 1 MiB",
    "outside": "is a symlink leading out of",
}


@pytest.mark.parametrize("kind", sorted(_PLANTED))
def test_a_planted_project_config_is_one_line_exit_2(
    tmp_path: Path, repo: Path, fake_agent: FakeAgent, kind: str
) -> None:
    _plant(repo / CONFIG, kind, tmp_path / "elsewhere.toml")
    done = run_cli(["run", "-p", "x"], cwd=repo, env=fake_agent([[{"result": "COMPLETE"}]]))
    _assert_one_line_error(done, 2, str(repo / CONFIG), _PLANTED[kind])
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("kind", ["dev-zero", "fifo", "huge"])
def test_a_user_config_that_is_not_a_bounded_regular_file_is_one_line_exit_2(
    tmp_path: Path, repo: Path, fake_agent: FakeAgent, kind: str
) -> None:
    user_config = tmp_path / "xdg-config" / "autopilot" / "config.toml"
    _plant(user_config, kind, tmp_path / "elsewhere.toml")
    done = run_cli(["run", "-p", "x"], cwd=repo, env=fake_agent([[{"result": "COMPLETE"}]]))
    message = "is a device, not a regular file" if kind == "dev-zero" else _PLANTED[kind]
    _assert_one_line_error(done, 2, str(user_config), message)


def test_a_user_config_reached_through_a_symlink_is_read(
    tmp_path: Path, repo: Path, fake_agent: FakeAgent
) -> None:
    # Dotfile managers link ~/.config files from elsewhere: the user's own choice.
    user_config = tmp_path / "xdg-config" / "autopilot" / "config.toml"
    _plant(user_config, "outside", tmp_path / "dotfiles.toml")
    done = run_cli(
        ["run", "-p", "x", "--plain"], cwd=repo, env=fake_agent([[{"result": "COMPLETE"}]])
    )
    assert done.returncode == 0, done.stderr
    runs = [p.name for p in (tmp_path / "runs").iterdir() if p.is_dir() and p.name[0] != "."]
    assert [name.split("-")[0] for name in runs] == ["stolen"]


@pytest.mark.parametrize(
    ("kind", "message"),
    [
        ("dev-zero", "is a symlink leading out of"),
        ("fifo", "is a FIFO, not a regular file"),
        ("outside", "is a symlink leading out of"),
    ],
)
def test_a_planted_prompt_file_is_one_line_exit_2(
    tmp_path: Path, repo: Path, fake_agent: FakeAgent, kind: str, message: str
) -> None:
    _plant(repo / "PROMPT.md", kind, tmp_path / "secret.md")
    done = run_cli(["run", "-f", "PROMPT.md"], cwd=repo, env=fake_agent([[{"result": "x"}]]))
    _assert_one_line_error(done, 2, "cannot read prompt file PROMPT.md", message)


def test_a_prompt_file_over_the_cap_is_one_line_exit_2(repo: Path, fake_agent: FakeAgent) -> None:
    with (repo / "PROMPT.md").open("wb") as handle:
        handle.truncate(64 * 1024 * 1024)
    done = run_cli(["run", "-f", "PROMPT.md"], cwd=repo, env=fake_agent([[{"result": "x"}]]))
    _assert_one_line_error(done, 2, "cannot read prompt file PROMPT.md", "is larger than 8 MiB")


def test_a_prompt_file_linked_within_the_project_or_outside_it_is_read(
    tmp_path: Path, repo: Path, fake_agent: FakeAgent
) -> None:
    (repo / "docs").mkdir()
    (repo / "docs" / "task.md").write_text("inside\n")
    (repo / "PROMPT.md").symlink_to("docs/task.md")
    env = fake_agent([[{"echo_prompt": True}, {"result": "COMPLETE"}]])
    done = run_cli(["run", "-f", "PROMPT.md", "--plain"], cwd=repo, env=env)
    assert done.returncode == 0, done.stderr
    (tmp_path / "mine.md").write_text("outside\n")
    done = run_cli(["run", "-f", str(tmp_path / "mine.md"), "--plain"], cwd=repo, env=env)
    assert done.returncode == 0, done.stderr


def test_a_prompt_file_the_agent_links_to_dev_zero_keeps_the_last_copy(
    tmp_path: Path, repo: Path, fake_agent: FakeAgent
) -> None:
    (repo / "PROMPT.md").write_text("the prompt\n")
    env = fake_agent(
        [
            [{"shell": "rm PROMPT.md && ln -s /dev/zero PROMPT.md"}, {"result": "step"}],
            [{"echo_prompt": True}, {"result": "COMPLETE"}],
        ]
    )
    done = run_cli(["run", "-f", "PROMPT.md", "--plain"], cwd=repo, env=env, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    folder = _run_dir(tmp_path)
    assert (folder / "iter-0002" / "prompt.md").read_text().startswith("the prompt\n\n---")
    warnings = [str(e["note"]) for e in _events(folder) if e["type"] == "warning"]
    assert any("PROMPT.md" in note and "leading out of" in note for note in warnings)
