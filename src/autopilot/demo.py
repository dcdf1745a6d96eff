"""``autopilot demo``: the whole product in under a minute, with no API key.

It makes a throwaway git repository with a backlog of three work items
(``.autopilot/tasks.jsonl``, one depending on another, each with a check command)
and drives the built-in scripted agent (``testkit.demo_agent``) through a real
``--backlog`` run — the same driver, files and events as a real run. The agent
reports through ``autopilot report``; autopilot runs the checks itself, and one of
them fails on the first try, so the demo shows an item reopened and then done. It
ends by printing where the run's files are and how to look at them again.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path

import click

from autopilot.agents.registry import make_adapter
from autopilot.config import RunConfig
from autopilot.errors import EnvironmentProblem
from autopilot.loop.arming import arm_run
from autopilot.loop.clock import SystemClock
from autopilot.runtime.run_result import ending_line
from autopilot.store.paths import run_dir, runs_root
from autopilot.store.run_state import PromptSource
from autopilot.view.foreground import drive

BACKLOG: list[dict[str, object]] = [
    {
        "id": "overview",
        "title": "Write the project overview",
        "prompt": "Write the project overview in docs/overview.md.",
        "acceptance_criteria": [
            {"id": "ac1", "text": "docs/overview.md exists", "check": "test -s docs/overview.md"}
        ],
    },
    {
        "id": "config",
        "title": "Describe the configuration file",
        "depends_on": ["overview"],
        "prompt": "Describe the configuration file in docs/config.md; name config.toml in it.",
        "acceptance_criteria": [
            {
                "id": "ac1",
                "text": "docs/config.md names config.toml",
                "check": "grep -q config.toml docs/config.md",
            }
        ],
    },
    {
        "id": "release",
        "title": "List the release steps",
        "prompt": "List the release steps in docs/release.md.",
        "acceptance_criteria": [
            {"id": "ac1", "text": "docs/release.md exists", "check": "test -s docs/release.md"}
        ],
    },
]
"""The demo's work items (``config``'s check fails on the agent's first try)."""


def _git(cwd: Path, *args: str) -> None:
    env = dict(
        os.environ,
        GIT_AUTHOR_NAME="autopilot demo",
        GIT_AUTHOR_EMAIL="demo@localhost",
        GIT_COMMITTER_NAME="autopilot demo",
        GIT_COMMITTER_EMAIL="demo@localhost",
    )
    try:
        subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True)
    except FileNotFoundError:
        raise EnvironmentProblem(
            "the demo needs git; install it (e.g. apt-get install git)"
        ) from None
    except subprocess.CalledProcessError as error:
        detail = error.stderr.decode(errors="replace").strip().splitlines()
        raise EnvironmentProblem(
            f"git {args[0]} failed: {detail[-1] if detail else error}"
        ) from None


def make_demo_repo(directory: Path | None) -> Path:
    """Create the demo repository (a new temp dir unless ``directory`` is given)."""
    repo = Path(tempfile.mkdtemp(prefix="autopilot-demo-")) if directory is None else directory
    repo.mkdir(parents=True, exist_ok=True)
    _git(repo, "init", "-q")
    _git(repo, "config", "user.name", "autopilot demo")
    _git(repo, "config", "user.email", "demo@localhost")
    (repo / ".autopilot").mkdir(exist_ok=True)
    (repo / ".autopilot" / "tasks.jsonl").write_text(
        "".join(json.dumps(item) + "\n" for item in BACKLOG)
    )
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "demo: start")
    return repo.resolve()


def run_demo(directory: Path | None, *, plain: bool = False) -> int:
    """Make the repo, run the loop, print where everything is; returns the exit code."""
    repo = make_demo_repo(directory)
    root = runs_root()
    config = RunConfig(
        agent="demo",
        label="demo",
        max_iterations=8,
        stagnation_limit=3,
        iteration_timeout_seconds=120,
        idle_timeout_seconds=60,
    )
    click.echo(f"autopilot demo: a throwaway repository with 3 work items at {repo}")
    click.echo(
        "autopilot demo: the built-in scripted agent works on one item per iteration and "
        "reports with autopilot report; autopilot runs each item's check itself"
    )
    click.echo("")
    source = PromptSource(text="work items of .autopilot/tasks.jsonl")
    run_id = arm_run(root, config, source, repo, SystemClock(), mode="backlog")
    click.echo(f"autopilot demo: from another terminal: autopilot watch {run_id}")
    cwd = Path.cwd()
    os.chdir(repo)
    try:
        result = drive(
            root,
            run_id,
            make_adapter("demo"),
            echo=click.echo,  # each line is safe to show already
            plain=plain,
        )
    finally:
        os.chdir(cwd)
    click.echo(ending_line(result))
    folder = run_dir(root, run_id)
    click.echo("")
    click.echo(f"The run's files:      {folder}")
    click.echo(
        "  state.json, events.jsonl, and iter-NNNN/ with each prompt and the raw agent output"
    )
    click.echo(f"The demo repository:  {repo}  (git log shows the agent's commits)")
    click.echo("Look again with:")
    click.echo(f"  autopilot replay {run_id}")
    click.echo(f"  autopilot status {run_id}")
    click.echo(f"  cd {repo} && autopilot tasks list")
    click.echo("  autopilot list")
    return result.exit_code
