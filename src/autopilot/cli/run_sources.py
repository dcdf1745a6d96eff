"""What ``autopilot run`` works from: a prompt (``-p``), a prompt file (``-f``), the
backlog (``--backlog``, with its approved run boundary) or a baked prompt
(``--self-improve``, ``--grow-project``, narrowed by ``--focus``)."""

from __future__ import annotations

from pathlib import Path

from msgspec import Struct

from autopilot.cli.echo import say
from autopilot.config import RunConfig
from autopilot.core.item_text import text_problem
from autopilot.core.structs import replace
from autopilot.errors import UsageError
from autopilot.prompts import BakedMode, BakedPrompt, load_baked_prompt
from autopilot.store.files import read_prompt_file
from autopilot.store.paths import runs_root
from autopilot.store.run_state import PromptSource


class RunSource(Struct, frozen=True):
    """A run's prompt source, its ``mode`` and, for a baked prompt, the prompt."""

    source: PromptSource
    mode: str
    baked: BakedPrompt | None = None


def run_source(
    cwd: Path,
    *,
    prompt_text: str | None,
    prompt_file: str | None,
    backlog: bool,
    self_improve: bool,
    grow_project: bool,
    focus: str | None,
) -> RunSource:
    """The one source the flags name, checked.

    Raises:
        UsageError: none or several given, ``--focus`` without a baked prompt, an
            empty prompt, a prompt file that cannot be read, an empty backlog.
        EnvironmentProblem: a baked prompt lost a token (the installation is broken).
    """
    flags = ((BakedMode.SELF_IMPROVE, self_improve), (BakedMode.GROW_PROJECT, grow_project))
    modes = [mode for mode, on in flags if on]
    given = sum(x is not None for x in (prompt_text, prompt_file)) + backlog + len(modes)
    if given != 1:
        raise UsageError(
            "give exactly one of -p TEXT, -f FILE, --backlog, --self-improve or --grow-project"
        )
    if focus is not None and not modes:
        raise UsageError("--focus goes with --self-improve or --grow-project")
    if modes:
        baked = load_baked_prompt(modes[0], focus)
        return RunSource(PromptSource(text=baked.text), baked.mode.value, baked)
    if backlog:
        return RunSource(PromptSource(text=backlog_prompt_source(cwd)), "backlog")
    return RunSource(prompt_source(cwd, prompt_text=prompt_text, prompt_file=prompt_file), "prompt")


def prompt_source(cwd: Path, *, prompt_text: str | None, prompt_file: str | None) -> PromptSource:
    """The prompt ``-f FILE`` (re-read every iteration) or else ``-p TEXT`` gives, checked
    (``run`` and ``arm``).

    Raises:
        UsageError: an empty prompt, one that is not Unicode text (it could not be
            handed to the agent), a prompt file that cannot be read or is empty.
    """
    if prompt_file is not None:
        given_path = Path(prompt_file).expanduser()
        try:
            # A bounded regular file only: a repository can plant a FIFO or a link to
            # /dev/zero under the name the user types.
            text = read_prompt_file(given_path, project=cwd)
        except OSError as error:
            raise UsageError(
                f"cannot read prompt file {prompt_file}: {error.strerror or error}"
            ) from None
        if not text.strip():
            raise UsageError(f"prompt file {prompt_file} is empty")
        # Re-read every iteration (edit it mid-run).
        return PromptSource(path=given_path.resolve())
    assert prompt_text is not None
    if not prompt_text.strip():
        raise UsageError("the prompt is empty")
    if (problem := text_problem(prompt_text)) is not None:
        raise UsageError(f"the prompt has {problem} (an argument that is not UTF-8)")
    return PromptSource(text=prompt_text)


def backlog_prompt_source(cwd: Path) -> str:
    """Check the project's backlog before a ``--backlog`` run; returns the run's prompt
    note (the prompts themselves are composed per work item).

    Raises:
        UsageError: no ``.autopilot/tasks.jsonl``, no work item in it, a line that
            is not one (named with its number), or an id used twice.
    """
    from autopilot.store.backlog import Backlog  # a prompt run loads no backlog module

    backlog = Backlog(cwd, runs_root() / ".locks").read()
    if not backlog.exists or not backlog.entries:
        raise UsageError(
            "no work items in .autopilot/tasks.jsonl: add some with autopilot tasks add "
            "PROMPT (or autopilot tasks import FILE)"
        )
    held = backlog.hold()
    if held:
        raise UsageError(f"fix it first: {held[0]}")
    return "work items of .autopilot/tasks.jsonl (the prompt is composed per item)"


def with_baked_defaults(config: RunConfig, baked: BakedPrompt) -> RunConfig:
    """``config`` with the baked prompt's tokens and name wherever no flag, variable or
    file set them (the prompt says which tokens end it)."""
    given = config.sources
    return replace(
        config,
        completion_promise=config.completion_promise
        if "completion_promise" in given
        else baked.completion_promise,
        abort_promise=config.abort_promise if "abort_promise" in given else baked.abort_promise,
        label=config.label if "label" in given else baked.mode.value,
    )


def approve_boundary(cwd: Path, *, approve: bool, steps: int, surfaces: tuple[str, ...]) -> None:
    """Check (or with ``approve`` write) the project's approved run boundary."""
    from autopilot.loop.approved import prepare_boundary
    from autopilot.store.backlog import Backlog

    items = Backlog(cwd, runs_root() / ".locks").read().items
    item_surfaces = [path for item in items for path in item.allowed_surface]
    boundary = prepare_boundary(
        cwd, approve=approve, steps=steps, surfaces=surfaces, item_surfaces=item_surfaces
    )
    if boundary is not None:
        say(
            f"autopilot: approved run boundary: {boundary.remaining_steps} steps, "
            f"allowed surfaces {', '.join(boundary.allowed_surfaces)}"
        )


def check_prompt_passable(adapter: object, source: PromptSource) -> None:
    """Refuse at start a prompt the agent cannot be handed the way asked (an adapter's
    ``prompt_problem``: ``--prompt-via arg`` over the OS's limit on one argument),
    rather than fail at launch every iteration. A ``-f`` file is read as it is now.

    Raises:
        UsageError: the adapter's reason, in one line.
    """
    problem_of = getattr(adapter, "prompt_problem", None)
    if problem_of is None:
        return
    prompt = source.text
    if prompt is None and source.path is not None:
        try:
            prompt = source.path.read_bytes().decode("utf-8", "replace")
        except OSError:
            return  # prompt_source read it a moment ago: the driver says what is wrong
    problem = problem_of(prompt) if prompt is not None else None
    if problem is not None:
        raise UsageError(problem)
