"""Checkpoints as a driver takes them: a baseline at the start, one after each
iteration, off outside a git repository, and never an error that ends a run.

``RunCheckpointer`` wraps ``Checkpoints`` for the loop: it decides once whether the
work tree is a repository (outside one there are none, said once), turns a git failure
into a warning (said once per distinct failure; the next iteration tries again), and
gives each checkpoint as ``CheckpointFacts``, the fields of a ``checkpoint`` event.

An iteration that left the work tree as the previous checkpoint found it (the mark
taken just before says so: ``TreeMark.tree_key``) shares that checkpoint: its event
names it, with no file changed, and no git process runs (``git add``, ``write-tree``,
``commit-tree`` and ``update-ref`` would only make a commit of the same tree). Only a
checkpoint this driver took with a mark can be shared, so the first one after a
(re)launch is always taken.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from msgspec import Struct

from autopilot.core.structs import replace
from autopilot.errors import AutopilotError
from autopilot.workspace.checkpoint_facts import Taken
from autopilot.workspace.checkpoints import Checkpoints
from autopilot.workspace.filters import FilterGuard
from autopilot.workspace.repo import Repository, open_repository
from autopilot.workspace.run_workspace import CHECKPOINT_INDEX

MAX_FILES_IN_EVENT = 50
"""A ``checkpoint`` event names at most this many changed paths (all are counted)."""


class CheckpointFacts(Struct, frozen=True):
    """One checkpoint just taken.

    Attributes:
        name: ``baseline`` or ``iter-NNNN``.
        iteration: 0 for the baseline, else the iteration it follows.
        sha: The checkpoint commit.
        files_changed: Paths changed since the previous checkpoint.
        files: The first ``MAX_FILES_IN_EVENT`` of them, each ``A``/``M``/``D``/``T``
            and the path (``"M src/a.py"``).
        warning: git's words when some files could not be read.

    An iteration that changed nothing shares the previous checkpoint: ``name`` and
    ``sha`` are that checkpoint's (``iter-NNNN`` of an earlier iteration), with no
    file changed.
    """

    name: str
    iteration: int
    sha: str
    files_changed: int
    files: tuple[str, ...]
    warning: str | None = None

    def event_fields(self) -> dict[str, Any]:
        """The fields of its ``checkpoint`` event (``docs/formats.md``)."""
        fields: dict[str, Any] = {
            "iteration": self.iteration,
            "name": self.name,
            "sha": self.sha,
            "filesChanged": self.files_changed,
            "files": list(self.files),
        }
        if self.warning:
            fields["note"] = self.warning
        return fields

    @classmethod
    def of(cls, taken: Taken, iteration: int) -> CheckpointFacts:
        """From a checkpoint just taken."""
        files = tuple(f"{c.status} {c.path}" for c in taken.changes[:MAX_FILES_IN_EVENT])
        checkpoint = taken.checkpoint
        return cls(
            checkpoint.name, iteration, checkpoint.sha, len(taken.changes), files, taken.warning
        )


class RunCheckpointer:
    """The checkpoints one run takes.

    Args:
        cwd: The work tree the agent runs in.
        run_dir: The run's folder (its ``checkpoint.index`` lives there).
        enabled: False for ``--no-checkpoints``.
        filters: The content filters trusted (``workspace.filters``): one planted
            since never runs while a checkpoint is taken.
        work_tree: The work tree, when the caller knows it already (no git call);
            None: ``open_repository(cwd)``.
    """

    def __init__(
        self,
        cwd: Path,
        run_dir: Path,
        *,
        enabled: bool = True,
        filters: FilterGuard | None = None,
        work_tree: Repository | None = None,
    ) -> None:
        self._store: Checkpoints | None = None
        # The newest checkpoint taken, and the tree key of the mark it was taken after
        # (None: it cannot be shared).
        self._latest: CheckpointFacts | None = None
        self._latest_key: str | None = None
        self._said: str | None = None
        self._unsaid: str | None = None
        if not enabled:
            return
        try:
            repo = work_tree or open_repository(cwd)
        except AutopilotError as error:
            self._unsaid = f"no checkpoints: {error}"
            return
        if filters is not None:
            repo = replace(repo, filters=filters)
        self._store = Checkpoints(repo, run_dir.name, run_dir / CHECKPOINT_INDEX)

    def warning(self) -> str | None:
        """A problem not yet reported (each distinct one once), or None."""
        unsaid, self._unsaid = self._unsaid, None
        return unsaid

    @property
    def active(self) -> bool:
        """Whether checkpoints are being taken."""
        return self._store is not None

    def baseline(
        self, head: str | None = None, tree_key: str | None = None
    ) -> CheckpointFacts | None:
        """The working tree as the run finds it, unless the run already has a
        baseline (a relaunch). None when checkpoints are off or git failed.

        Args:
            head: HEAD as a mark just saw it (None: asked of git).
            tree_key: That mark's tree key (``TreeMark.tree_key``): a first iteration
                that leaves the same key shares the baseline (see ``after_iteration``).
        """
        store = self._store
        if store is None:
            return None
        try:
            if any(c.name == "baseline" for c in store.history()):
                return None
            return self._taken(CheckpointFacts.of(store.take_baseline(head), 0), tree_key)
        except AutopilotError as error:
            self._fail(error)
            return None

    def after_iteration(
        self, iteration: int, head: str | None = None, tree_key: str | None = None
    ) -> CheckpointFacts | None:
        """The working tree after ``iteration``. None when off or git failed.

        Args:
            iteration: The iteration just ended (1-based).
            head: HEAD as just seen (None: asked of git).
            tree_key: The tree key of the mark just taken (``TreeMark.tree_key``):
                the same as the previous checkpoint's, that checkpoint is shared and
                no git process runs. None: the checkpoint is taken.
        """
        store = self._store
        if store is None:
            return None
        latest = self._latest
        if tree_key is not None and tree_key == self._latest_key and latest is not None:
            return CheckpointFacts(latest.name, iteration, latest.sha, 0, ())
        try:
            taken = CheckpointFacts.of(store.take_iteration(iteration, head), iteration)
        except AutopilotError as error:
            self._latest_key = None
            self._fail(error)
            return None
        return self._taken(taken, tree_key)

    def _taken(self, facts: CheckpointFacts, tree_key: str | None) -> CheckpointFacts:
        """Remember the checkpoint just taken; one that left files out (``warning``)
        is never shared."""
        self._latest = facts
        self._latest_key = None if facts.warning else tree_key
        return facts

    def _fail(self, error: AutopilotError) -> None:
        """Remember the failure for ``warning`` unless it was said already."""
        message = f"checkpoint failed: {error}"
        if message != self._said:
            self._said = self._unsaid = message
