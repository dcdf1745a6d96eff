"""The baked prompts are checked as they load (a lost token refuses the run)."""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from autopilot.errors import EnvironmentProblem, UsageError
from autopilot.prompts import BakedMode, load_baked_prompt

PROMPTS = Path(__file__).resolve().parents[2] / "src" / "autopilot" / "prompts"


@pytest.mark.parametrize(
    ("mode", "abort"),
    [
        (BakedMode.SELF_IMPROVE, "ABORT_NO_IMPROVEMENTS"),
        (BakedMode.GROW_PROJECT, "ABORT_NO_BACKLOG"),
    ],
)
def test_the_shipped_prompts_load_with_their_tokens(mode: BakedMode, abort: str) -> None:
    prompt = load_baked_prompt(mode)
    assert (prompt.completion_promise, prompt.abort_promise) == ("COMPLETE", abort)
    lines = set(prompt.text.splitlines())
    assert {"COMPLETE", abort} <= lines
    assert not re.search(r"\{focus\}", prompt.text)
    assert "{focus}" not in prompt.text
    assert prompt.stages[0] == "ORIENT" and prompt.stages[-1] == "END"


def test_focus_narrows_the_prompt() -> None:
    prompt = load_baked_prompt(BakedMode.SELF_IMPROVE, "the  CSV\nparser")
    assert "Focus on this, and only this: the CSV parser" in prompt.text
    with pytest.raises(UsageError, match="--focus must be"):
        load_baked_prompt(BakedMode.SELF_IMPROVE, "   ")
    with pytest.raises(UsageError, match="control characters"):
        load_baked_prompt(BakedMode.SELF_IMPROVE, "a\x1b[31m")


@pytest.mark.parametrize(
    ("edit", "problem"),
    [
        (lambda t: t.replace("\nABORT_NO_BACKLOG\n", "\n"), "token ABORT_NO_BACKLOG"),
        (lambda t: t.replace("\nCOMPLETE\n", "\nsay COMPLETE\n"), "token COMPLETE"),
        (lambda t: t.replace("{focus}", ""), "no {focus} placeholder"),
    ],
)
def test_a_prompt_that_lost_a_token_refuses_to_load(
    tmp_path: Path, edit: Callable[[str], str], problem: str
) -> None:
    for name in ("self_improve.md", "grow_project.md"):
        shutil.copy(PROMPTS / name, tmp_path / name)
    path = tmp_path / "grow_project.md"
    path.write_text(edit(path.read_text()))
    with pytest.raises(EnvironmentProblem, match=r"prompt .* is broken") as caught:
        load_baked_prompt(BakedMode.GROW_PROJECT, folder=tmp_path)
    assert problem in str(caught.value)
    load_baked_prompt(BakedMode.SELF_IMPROVE, folder=tmp_path)
