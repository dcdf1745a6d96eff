"""The baked prompts of ``--self-improve`` and ``--grow-project``, checked as they load.

Each prompt is a Markdown file beside this module with a ``{focus}`` placeholder and
its completion and abort tokens, each on a line of its own (the way the agent must
write them). ``load_baked_prompt`` refuses a prompt that lost its placeholder or a
token, so a run never starts with a prompt whose ending cannot be recognised.
"""

from __future__ import annotations

import re
from enum import StrEnum
from pathlib import Path

from msgspec import Struct

from autopilot.errors import EnvironmentProblem, UsageError

MAX_FOCUS_CHARS = 500


class BakedMode(StrEnum):
    """The baked prompts; the value is the run's label and ``mode``."""

    SELF_IMPROVE = "self-improve"
    GROW_PROJECT = "grow-project"


class BakedPrompt(Struct, frozen=True):
    """A baked prompt, ready to send.

    Attributes:
        mode: Which one.
        text: The prompt with the focus filled in.
        completion_promise: Its completion token.
        abort_promise: Its abort token.
        stages: The stage plan it announces.
    """

    mode: BakedMode
    text: str
    completion_promise: str
    abort_promise: str
    stages: tuple[str, ...]


_FILES = {BakedMode.SELF_IMPROVE: "self_improve.md", BakedMode.GROW_PROJECT: "grow_project.md"}
_TOKENS = {
    BakedMode.SELF_IMPROVE: ("COMPLETE", "ABORT_NO_IMPROVEMENTS"),
    BakedMode.GROW_PROJECT: ("COMPLETE", "ABORT_NO_BACKLOG"),
}
_PLAN_RE = re.compile(r"^\[STAGE_PLAN: (.+)\]$", re.MULTILINE)


def check_baked_prompt(text: str, completion_promise: str, abort_promise: str) -> list[str]:
    """What a baked prompt lacks: the ``{focus}`` placeholder, or a token on its own line."""
    problems = []
    if "{focus}" not in text:
        problems.append("it has no {focus} placeholder")
    for token in (completion_promise, abort_promise):
        if not re.search(rf"^{re.escape(token)}$", text, re.MULTILINE):
            problems.append(f"its token {token} is not on a line of its own")
    return problems


def load_baked_prompt(
    mode: BakedMode, focus: str | None = None, *, folder: Path | None = None
) -> BakedPrompt:
    """Read, check and fill in a baked prompt.

    Args:
        mode: Which prompt.
        focus: What to narrow the work to (``--focus``), or None.
        folder: Where the prompt files are (default: beside this module).

    Raises:
        EnvironmentProblem: the prompt file is missing or lost its placeholder or a
            token (the installation is broken: autopilot refuses to start).
        UsageError: ``focus`` is empty, too long or holds control characters.
    """
    path = (folder or Path(__file__).parent) / _FILES[mode]
    try:
        template = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise EnvironmentProblem(f"the --{mode.value} prompt cannot be read ({error})") from None
    completion, abort = _TOKENS[mode]
    problems = check_baked_prompt(template, completion, abort)
    if problems:
        raise EnvironmentProblem(
            f"the --{mode.value} prompt in {path} is broken: {'; '.join(problems)}; "
            "reinstall autopilot"
        )
    focus_line = ""
    if focus is not None:
        cleaned = " ".join(focus.split())
        if not cleaned or len(cleaned) > MAX_FOCUS_CHARS:
            raise UsageError(f"--focus must be 1-{MAX_FOCUS_CHARS} characters of text")
        if any(ord(ch) < 32 for ch in focus if ch not in "\t\n"):
            raise UsageError("--focus must not hold control characters")
        focus_line = f"Focus on this, and only this: {cleaned}"
    plan = _PLAN_RE.search(template)
    stages = tuple(s.strip() for s in plan.group(1).split(",")) if plan else ()
    return BakedPrompt(
        mode, template.replace("{focus}", focus_line).rstrip() + "\n", completion, abort, stages
    )
