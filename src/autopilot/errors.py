"""The exception tree of autopilot.

Every error a user can cause ends as one line on stderr and a documented exit code
(see ``docs/architecture.md`` and the README); none of them is a traceback::

    AutopilotError                 (exit 1)
    ├── UsageError                 a malformed option, config or RUN (exit 2)
    │   ├── RunNotFoundError       RUN names no run, or more than one (exit 2)
    │   ├── RepositoryError        not a repository, bare, no commit, detached HEAD,
    │   │                          staged changes, a branch or path that exists (exit 2)
    │   └── BacklogError           tasks.jsonl cannot be read or changed as asked (exit 2)
    │       └── BacklogWriteError  the disk refused the write (full, permissions) (exit 4)
    ├── MergeConflictError         a run's branch does not apply cleanly (exit 1)
    ├── MergeVerifyError           a ``merge --verify`` command failed (exit 1)
    │   └── MergeStoppedError      a signal stopped it; nothing changed (exit 130)
    └── EnvironmentProblem         the machine cannot do what was asked (exit 4)
        ├── RunsRootError          the runs root is missing, not ours, or unwritable
        ├── StateFileError         state.json is unreadable or corrupt
        ├── RunLockedError         another driver holds the run
        │   └── ProjectBusyError   another run is active in the same work tree
        ├── CheckoutBusyError      another ``merge`` is under way into the same checkout
        ├── AgentNotFoundError     the agent CLI is not installed
        ├── GitUnavailableError    git is missing, cannot start, or timed out
        └── GitCommandError        a git command failed unexpectedly

Shutdown (SIGINT/SIGTERM) is not an exception: signal handlers set flags that the
loop reads at its boundaries.
"""

from __future__ import annotations


class AutopilotError(Exception):
    """Root of autopilot's errors; ``str(error)`` is the one line shown to the user."""

    exit_code = 1


class UsageError(AutopilotError):
    """A malformed option, config value or run reference."""

    exit_code = 2


class RunNotFoundError(UsageError):
    """A RUN argument matched no run, or a prefix matched several."""


class BacklogError(UsageError):
    """``.autopilot/tasks.jsonl`` cannot be read, or a change to it was refused."""


class BacklogWriteError(BacklogError):
    """The disk refused to write ``.autopilot/tasks.jsonl`` (full, a quota,
    permissions); the file is as it was before.

    A ``BacklogError`` for the code that holds a run's boundary on any backlog
    problem, but the machine's problem for the user: exit 4, as for ``state.json``.

    Attributes:
        errno: The OS error number (``ENOSPC``: full), else None.
    """

    exit_code = 4

    def __init__(self, message: str, *, errno: int | None = None) -> None:
        super().__init__(message)
        self.errno = errno


class EnvironmentProblem(AutopilotError):
    """The machine cannot do what was asked (files, permissions, binaries)."""

    exit_code = 4


class RunsRootError(EnvironmentProblem):
    """The runs root cannot be used (not a directory, not ours, not writable)."""


class StateFileError(EnvironmentProblem):
    """A run's ``state.json`` is unreadable, not a JSON object, or cannot be written.

    Attributes:
        errno: The OS error number when the disk refused (``ENOSPC``: full), else None.
    """

    def __init__(self, message: str, *, errno: int | None = None) -> None:
        super().__init__(message)
        self.errno = errno


class RunLockedError(EnvironmentProblem):
    """Another live driver owns the run."""


class ProjectBusyError(RunLockedError):
    """Another run is active in the same work tree."""


class CheckoutBusyError(EnvironmentProblem):
    """Another ``autopilot merge`` is under way into the same checkout."""


class AgentNotFoundError(EnvironmentProblem):
    """The agent CLI's executable is not on PATH."""


class RepositoryError(UsageError):
    """The repository cannot be used as asked (not one, bare, no commit, detached
    HEAD, staged changes, a branch or worktree path that already exists)."""


class MergeConflictError(AutopilotError):
    """A run's branch does not apply cleanly; nothing was changed.

    Attributes:
        files: The conflicting paths, relative to the top of the work tree.
    """

    def __init__(self, message: str, files: tuple[str, ...]) -> None:
        super().__init__(message)
        self.files = files


class MergeVerifyError(AutopilotError):
    """A ``merge --verify`` command failed on the merge's result; nothing was changed."""


class MergeStoppedError(MergeVerifyError):
    """A signal (Ctrl-C, SIGTERM, SIGHUP) stopped ``merge --verify``; nothing was
    changed."""

    exit_code = 130


class GitUnavailableError(EnvironmentProblem):
    """git is not installed, cannot be started, or a call timed out."""


class GitCommandError(EnvironmentProblem):
    """A git command failed in a way autopilot did not expect (git's own words)."""
