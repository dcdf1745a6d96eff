"""Checkpoints: the whole working tree as a commit under ``refs/autopilot/<runId>/``.

A checkpoint is built with a temporary index of the run's own (``GIT_INDEX_FILE``;
``add --all`` honours ``.gitignore``; ``write-tree``; ``commit-tree``) and stored as a
ref (``baseline``, ``iter-0001``, …, ``before-restore-0001``, ``restore-0001``). The
user's HEAD, branch, index, stash and reflog are never touched and their hooks never
run. The run's index starts as a copy of the user's, so a checkpoint of a large tree
with one changed file only hashes that file; later ones reuse its stat information.

Each checkpoint's parent is the run's previous checkpoint, and its message carries
``Autopilot-*`` trailers (run, name, sequence, HEAD, files changed). An iteration that
changed nothing has no checkpoint of its own: it shares the one before
(``workspace.taking``), which its ``checkpoint`` event in the run's log names, so
``find_iteration`` looks there when it has no ref by the iteration's name. Restoring brings
the working tree to a checkpoint after a safety checkpoint of the tree as it is (so a
restore can be undone) and never rewinds autopilot's records in ``.autopilot/`` (the
memory file, the pause file, the backlog, its approved boundary, a decision file:
``workspace.records``), which ``diff`` leaves out too; ``config.toml`` follows the code
(``docs/architecture.md``, "The project's ``.autopilot/`` folder").
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from pathlib import Path

from autopilot.errors import GitCommandError, RepositoryError, UsageError
from autopilot.store.private import PRIVATE_FILE_MODE
from autopilot.workspace.changes import in_the_way, tree_changes
from autopilot.workspace.checkpoint_facts import (
    Checkpoint,
    CheckpointKind,
    FileChange,
    RestoreResult,
    Taken,
    checkpoint_of,
    iteration_name,
)
from autopilot.workspace.records import NOT_RECORDS, record_changes, with_records
from autopilot.workspace.repo import AUTOPILOT_IDENTITY, Repository, first_line

REF_ROOT = "refs/autopilot"
EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"

_DAMAGED_INDEX = re.compile(
    rb"index file corrupt|bad signature|unknown index entry|smaller than expected|bad index"
)


class Checkpoints:
    """The checkpoints of one run in one repository.

    Args:
        repo: The work tree the run works in.
        run_id: The run (its refs are ``refs/autopilot/<run_id>/…``).
        index_path: The run's own index file (created on first use, outside the
            work tree, e.g. in the run's folder).
        log: The run's event log, where an iteration that shared an earlier
            checkpoint names it (None: only refs are looked at).
    """

    def __init__(
        self, repo: Repository, run_id: str, index_path: Path, log: Path | None = None
    ) -> None:
        if not run_id or "/" in run_id or ".." in run_id:
            raise UsageError(f"invalid run id {run_id!r}")
        self.repo = repo
        self.run_id = run_id
        self.index_path = index_path
        self.log = log
        self.prefix = f"{REF_ROOT}/{run_id}/"
        # The newest checkpoint this object took or listed: the next one's parent,
        # without a ``for-each-ref``. A run's refs are written by its driver only (a
        # restore is refused while it lives, and holds the run's lock), so it cannot
        # go stale while the driver holds it.
        self._taken: Checkpoint | None = None
        self._known = False  # whether ``_taken`` is known (listed or taken)

    # Reading -------------------------------------------------------------------------

    def history(self) -> list[Checkpoint]:
        """Every checkpoint of the run, oldest first (by sequence).

        Raises:
            GitCommandError: git cannot list the refs.
        """
        data = self.repo.out(
            "for-each-ref",
            "--format=%(refname)%00%(objectname)%00%(tree)%00%(creatordate:unix)%00"
            "%(contents:body)%1e",
            self.prefix,
        )
        found = []
        for record in data.decode("utf-8", "surrogateescape").split("\x1e"):
            fields = record.lstrip("\n").split("\0")
            if len(fields) < 5 or not fields[0].startswith(self.prefix):
                continue
            name = fields[0][len(self.prefix) :]
            checkpoint = checkpoint_of(name, fields[1], fields[2], fields[3], fields[4])
            if checkpoint is not None:
                found.append(checkpoint)
        found.sort(key=lambda c: (c.sequence, c.created_at_ms, c.name))
        self._taken, self._known = (found[-1] if found else None), True
        return found

    def latest(self) -> Checkpoint | None:
        """The newest checkpoint, or None."""
        found = self.history()
        return found[-1] if found else None

    def find(self, name: str) -> Checkpoint:
        """The checkpoint called ``name``.

        Raises:
            UsageError: there is none by that name.
        """
        for checkpoint in self.history():
            if checkpoint.name == name:
                return checkpoint
        raise UsageError(
            f"run {self.run_id} has no checkpoint {name!r} (see autopilot checkpoints)"
        )

    def find_iteration(self, iteration: int) -> Checkpoint:
        """The checkpoint of the tree after ``iteration`` (0: the baseline): its own,
        or the earlier one it shared when it changed nothing (its ``iteration`` is
        then that earlier iteration's).

        Raises:
            UsageError: there is none.
        """
        history = self.history()
        names = [iteration_name(iteration)]
        if self.log is not None and iteration > 0:
            shared = _shared_name(self.log, iteration)
            if shared is not None:
                names.append(shared)
        for name in names:
            for checkpoint in history:
                if checkpoint.name == name:
                    return checkpoint
        what = "baseline checkpoint" if iteration == 0 else f"checkpoint of iteration {iteration}"
        raise UsageError(f"run {self.run_id} has no {what} (see autopilot checkpoints)")

    def before(self, checkpoint: Checkpoint) -> Checkpoint | None:
        """The checkpoint taken just before ``checkpoint``, or None."""
        earlier = [c for c in self.history() if c.sequence < checkpoint.sequence]
        return earlier[-1] if earlier else None

    def changes(self, old_tree: str, new_tree: str) -> tuple[FileChange, ...]:
        """Paths that differ between two trees, sorted (renames as delete + add)."""
        return tree_changes(self.repo, old_tree, new_tree)

    def diff(self, old: Checkpoint | None, new: Checkpoint, *, stat: bool = False) -> bytes:
        """``git diff`` between two checkpoints (``old`` None: the empty tree), as bytes,
        autopilot's records left out (they are the run's, not the agent's work).

        External diff tools and text conversion filters are not run.
        """
        args = [
            "diff",
            "--no-ext-diff",
            "--no-textconv",
            "--color=never",
        ]
        if stat:
            args.append("--stat")
        return self.repo.out(*args, old.tree if old else EMPTY_TREE, new.tree, "--", *NOT_RECORDS)

    # Writing -------------------------------------------------------------------------

    def take_baseline(self, head: str | None = None) -> Taken:
        """Checkpoint the working tree as the run finds it (uncommitted changes too).

        Args:
            head: HEAD's sha as the caller just saw it; None: asked of git.

        Raises:
            GitCommandError: git failed (its words in the message).
            GitUnavailableError: git is missing or timed out.
        """
        return self._take("baseline", head)

    def take_iteration(self, iteration: int, head: str | None = None) -> Taken:
        """Checkpoint the working tree after ``iteration`` (1-based).

        Args:
            iteration: The iteration just ended.
            head: HEAD's sha as the caller just saw it (its ``Autopilot-Head``
                trailer); None: asked of git.

        Raises:
            GitCommandError, GitUnavailableError: as ``take_baseline``.
        """
        if iteration < 1:
            raise UsageError(f"iteration must be 1 or more, not {iteration}")
        return self._take(iteration_name(iteration), head)

    def restore(self, target: Checkpoint) -> RestoreResult:
        """Bring the working tree to ``target``; HEAD, branch and index stay as they are.

        A ``before-restore-NNNN`` checkpoint of the tree as it is comes first; the tree
        as left is ``restore-NNNN``. Files in neither (ignored ones) are left alone.

        Raises:
            RepositoryError: git refused (a file changed meanwhile, or an untracked
                file is where the checkpoint has one); nothing was changed.
            GitCommandError, GitUnavailableError: as ``take_baseline``.
        """
        number = 1 + sum(1 for c in self.history() if c.kind is CheckpointKind.BEFORE_RESTORE)
        safety = self._take(f"before-restore-{number:04d}").checkpoint
        effective, kept = self._keeping(target.tree, safety.tree)
        changes = self.changes(safety.tree, effective)
        if not changes:
            return RestoreResult(target, safety, None, (), kept)
        blocked = in_the_way(self.repo.top, changes)
        if blocked:
            shown = ", ".join(blocked[:5]) + (" …" if len(blocked) > 5 else "")
            raise RepositoryError(
                f"cannot restore {target.name}: ignored files are where it has files "
                f"({shown}); move them away first; nothing was changed"
            )
        done = self.repo.run("read-tree", "-m", "-u", safety.tree, effective, env=self._index_env())
        _keep_private(self.index_path)
        if done.returncode != 0:
            why = first_line(done.stderr) or "git read-tree failed"
            raise RepositoryError(
                f"cannot restore {target.name}: {why}; "
                f"the working tree as it was is checkpoint {safety.name}"
            )
        result = self._commit(f"restore-{number:04d}", effective, safety, len(changes))
        return RestoreResult(target, safety, result, changes, kept)

    def delete_all(self) -> int:
        """Delete every ref of the run; returns how many. Their objects go with git gc."""
        names = [c.name for c in self.history()]
        if names:
            commands = "".join(f"delete {self.prefix}{name}\n" for name in names)
            self.repo.out("update-ref", "--stdin", input_bytes=commands.encode())
        self._taken, self._known = None, False
        return len(names)

    # Inside --------------------------------------------------------------------------

    def _index_env(self) -> dict[str, str]:
        return {"GIT_INDEX_FILE": str(self.index_path)}

    def _snapshot_tree(self) -> tuple[str, str | None]:
        """Stage the whole working tree into the run's index; its tree and a warning."""
        if not self.index_path.exists():
            self._seed_index()
        done = self.repo.run("add", "--all", "--ignore-errors", "--", ".", env=self._index_env())
        if done.returncode != 0 and _DAMAGED_INDEX.search(done.stderr):
            # A damaged index of ours: start it again from nothing.
            with contextlib.suppress(FileNotFoundError):
                self.index_path.unlink()
            done = self.repo.run(
                "add", "--all", "--ignore-errors", "--", ".", env=self._index_env()
            )
        warning = None
        if done.returncode != 0:
            fatal = [
                line
                for line in done.stderr.decode("utf-8", "replace").splitlines()
                if line.startswith("fatal: ") and line != "fatal: adding files failed"
            ]
            if fatal:
                raise GitCommandError(f"git add failed in {self.repo.top}: {fatal[0][7:]}")
            warning = first_line(done.stderr)  # unreadable files were left out
        tree = self.repo.text("write-tree", env=self._index_env())
        _keep_private(self.index_path)
        return tree, warning

    def _seed_index(self) -> None:
        """Start the run's index as a copy of the user's: its stat data saves hashing."""
        self.index_path.parent.mkdir(parents=True, exist_ok=True)
        source = self.repo.index_path()
        try:
            _copy_file(source, self.index_path)
            _keep_private(self.index_path)
        except FileNotFoundError:
            return  # no index yet (a new repository): add builds one
        except OSError as error:
            raise GitCommandError(
                f"cannot copy the index {source}: {error.strerror or error}"
            ) from None

    def _take(self, name: str, head: str | None = None) -> Taken:
        tree, warning = self._snapshot_tree()
        previous = self._taken if self._known else self.latest()
        if previous is None:
            head = head or self.repo.head()
            base = head or EMPTY_TREE  # diff-tree takes the commit for its tree
        else:
            base = previous.tree
        changes = self.changes(base, tree) if base != tree else ()
        checkpoint = self._commit(name, tree, previous, len(changes), head)
        return Taken(checkpoint, changes, warning)

    def _commit(
        self,
        name: str,
        tree: str,
        parent: Checkpoint | None,
        files_changed: int,
        head: str | None = None,
    ) -> Checkpoint:
        head = head or self.repo.head()
        sequence = (parent.sequence if parent else 0) + 1
        message = (
            f"autopilot checkpoint {name} of run {self.run_id}\n\n"
            f"Autopilot-Run: {self.run_id}\n"
            f"Autopilot-Checkpoint: {name}\n"
            f"Autopilot-Sequence: {sequence}\n"
            f"Autopilot-Head: {head or ''}\n"
            f"Autopilot-Files-Changed: {files_changed}\n"
        )
        args = ["commit-tree", "--no-gpg-sign", tree, "-F", "-"]
        if parent is not None:
            args[2:2] = ["-p", parent.sha]
        sha = (
            self.repo.out(*args, env=AUTOPILOT_IDENTITY, input_bytes=message.encode())
            .decode()
            .strip()
        )
        self.repo.out(
            "update-ref", "-m", f"autopilot checkpoint {name}", f"{self.prefix}{name}", sha
        )
        created_at_ms = time.time_ns() // 1_000_000
        self._taken = Checkpoint(name, sha, tree, sequence, head, files_changed, created_at_ms)
        self._known = True
        return self._taken

    def _keeping(self, target_tree: str, current_tree: str) -> tuple[str, tuple[str, ...]]:
        """``target_tree`` with autopilot's records (``workspace.records``) as
        ``current_tree`` has them, and the records that differed."""
        differing = record_changes(self.repo, target_tree, current_tree)
        if not differing:
            return target_tree, ()
        scratch = self.index_path.with_name(self.index_path.name + ".restore")
        tree = with_records(self.repo, target_tree, differing, scratch)
        return tree, tuple(change.path for change in differing)


def _shared_name(log: Path, iteration: int) -> str | None:
    """The checkpoint the ``checkpoint`` event of ``iteration`` names in the run's log
    (the last such event), or None."""
    from autopilot.store.event_stream import iter_event_lines
    from autopilot.store.records import decode_event_line

    found = None
    try:
        stream = log.open("rb")
    except OSError:
        return None
    with stream:
        for line in iter_event_lines(stream):
            if b'"checkpoint"' not in line:
                continue
            event = decode_event_line(line)
            if event is None or event.get("type") != "checkpoint":
                continue
            name = event.get("name")
            if event.get("iteration") == iteration and isinstance(name, str) and name:
                found = name
    return found


def _keep_private(index: Path) -> None:
    """Mode 0600 for a run's index, as for every run file (git writes an index anew,
    through a lock file, with the umask's mode, on every update)."""
    with contextlib.suppress(OSError):
        os.chmod(index, PRIVATE_FILE_MODE)


def _copy_file(source: Path, target: Path) -> None:
    """``shutil.copyfile``'s copy of the bytes, without loading ``shutil`` into every
    driver of a repository (its archive support imports bz2, lzma and zlib)."""
    with source.open("rb") as reader, target.open("wb") as writer:
        while chunk := reader.read(1 << 20):
            writer.write(chunk)
