"""Running git for autopilot, hardened, and the facts about a repository it needs.

Every call is an argv list (no shell) with the user's hooks, fsmonitor and optional
locks off (``-c core.hooksPath=/dev/null -c core.fsmonitor=false
--no-optional-locks``), no terminal prompt, no pager, and a timeout that ends git and
whatever it started (a clean filter, say), so nothing a repository's config plants
runs inside autopilot or stalls it. Variables that would point git at another
repository or index (``GIT_DIR``, ``GIT_INDEX_FILE``, …, as set inside a git hook) are
removed; a caller that wants a temporary index passes it.
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Protocol

from msgspec import Struct

from autopilot.errors import GitCommandError, GitUnavailableError, RepositoryError
from autopilot.process_exit import communicate, spawn_and_communicate


class GitFilters(Protocol):
    """What a repository asks of the filters a run trusts (``workspace.filters``'
    ``FilterGuard``): the environment of one git command."""

    def environment(self, cwd: Path, args: tuple[str, ...]) -> dict[str, str]:
        """What to add to the environment of ``git ARGS`` in ``cwd``."""
        ...


GIT_TIMEOUT_SECONDS = 120.0
"""The longest one git call may take (a first checkpoint hashes every untracked file)."""

HARDENING = (
    "--no-optional-locks",
    "-c",
    "core.hooksPath=/dev/null",
    "-c",
    "core.fsmonitor=false",
    "-c",
    "core.quotepath=off",
    "-c",
    "core.splitIndex=false",
    "-c",
    "core.logAllRefUpdates=true",
    "-c",
    "gc.auto=0",
    "-c",
    "commit.gpgSign=false",
    "-c",
    "advice.detachedHead=false",
)
"""Options every call starts with."""

# ``git rev-parse --local-env-vars`` (git 2.39), plus the config ones.
_REPOSITORY_VARIABLES = (
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_COMMON_DIR",
    "GIT_CONFIG",
    "GIT_CONFIG_COUNT",
    "GIT_CONFIG_PARAMETERS",
    "GIT_DIR",
    "GIT_GRAFT_FILE",
    "GIT_IMPLICIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_INTERNAL_SUPER_PREFIX",
    "GIT_NO_REPLACE_OBJECTS",
    "GIT_OBJECT_DIRECTORY",
    "GIT_PREFIX",
    "GIT_REPLACE_REF_BASE",
    "GIT_SHALLOW_FILE",
    "GIT_WORK_TREE",
)

AUTOPILOT_IDENTITY = {
    "GIT_AUTHOR_NAME": "autopilot",
    "GIT_AUTHOR_EMAIL": "autopilot@localhost",
    "GIT_COMMITTER_NAME": "autopilot",
    "GIT_COMMITTER_EMAIL": "autopilot@localhost",
}
"""Who checkpoint commits are by (they are not the user's commits)."""


OWN_FILES = ":(exclude,glob)**/.autopilot/**"
"""A pathspec for everything but autopilot's own files: a ``.autopilot/`` folder at any
depth (the memory file, OFF, config) is never the user's work."""


def git_environment(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for a git call: ours, minus repository overrides, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if k not in _REPOSITORY_VARIABLES}
    env.update(GIT_TERMINAL_PROMPT="0", GIT_OPTIONAL_LOCKS="0", GIT_PAGER="cat", LC_ALL="C")
    env.pop("GIT_EXTERNAL_DIFF", None)
    if extra:
        env.update(extra)
    return env


def run_git(
    cwd: Path,
    *args: str,
    env: Mapping[str, str] | None = None,
    input_bytes: bytes | None = None,
    timeout_seconds: float = GIT_TIMEOUT_SECONDS,
    base_env: Mapping[str, str] | None = None,
) -> subprocess.CompletedProcess[bytes]:
    """Run ``git ARGS`` in ``cwd`` with the hardening above; any exit status.

    Args:
        cwd: Where git runs.
        args: Its arguments.
        env: Variables added to the environment (e.g. ``GIT_INDEX_FILE``).
        input_bytes: Sent on stdin (else stdin is ``/dev/null``).
        timeout_seconds: After this git and its process group are killed.
        base_env: ``git_environment()`` as a caller that makes a call after another
            took it once (this process's environment does not change meanwhile);
            None: taken now.

    Raises:
        GitUnavailableError: git is not installed, cannot start, or timed out.
    """
    argv = ["git", *HARDENING, *args]
    if base_env is None:
        environment = git_environment(env)
    else:
        environment = {**base_env, **env} if env else dict(base_env)
    program = git_program(environment.get("PATH"))
    if program is not None:
        try:
            # ``-C``: git changes folder itself (the spawn cannot), before it reads
            # anything, as a child started in ``cwd`` would.
            code, stdout, stderr = spawn_and_communicate(
                program,
                ["git", "-C", os.fspath(cwd), *argv[1:]],
                environment,
                input_bytes,
                timeout_seconds,
            )
        except FileNotFoundError as error:  # the git found before is gone?
            _find_git.cache_clear()
            if git_program(environment.get("PATH")) == program:  # no: it cannot run
                raise GitUnavailableError(f"cannot run {program}: {error.strerror}") from None
            return run_git(
                cwd,
                *args,
                env=env,
                input_bytes=input_bytes,
                timeout_seconds=timeout_seconds,
                base_env=base_env,
            )
        except OSError as error:
            raise GitUnavailableError(f"cannot run git: {error.strerror or error}") from None
        except subprocess.TimeoutExpired:
            raise _timed_out(args, timeout_seconds, cwd) from None
        if code == 128 and not os.path.isdir(cwd):
            raise _not_a_folder(cwd)
        return subprocess.CompletedProcess(argv, code, stdout, stderr)
    try:
        process = _start(argv, program, cwd, environment, input_bytes)
    except FileNotFoundError:
        if not cwd.is_dir():
            raise _not_a_folder(cwd) from None
        raise GitUnavailableError("git is not installed (not found on PATH)") from None
    except NotADirectoryError:
        raise _not_a_folder(cwd) from None
    except OSError as error:
        raise GitUnavailableError(f"cannot run git: {error.strerror or error}") from None
    with process:
        try:
            stdout, stderr = communicate(process, input_bytes, timeout_seconds)
        except subprocess.TimeoutExpired:
            # git is not reaped yet, so its pid still names its group: a filter or hook
            # it started (holding the pipes) ends with it, never lingers.
            with contextlib.suppress(OSError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()  # the pipes are closed unread on leaving ``with``
            raise _timed_out(args, timeout_seconds, cwd) from None
    return subprocess.CompletedProcess(argv, process.returncode, stdout, stderr)


def _timed_out(args: tuple[str, ...], timeout_seconds: float, cwd: Path) -> GitUnavailableError:
    return GitUnavailableError(
        f"git {args[0] if args else ''} took longer than {timeout_seconds:.0f} s in {cwd}"
    )


def _not_a_folder(cwd: Path) -> RepositoryError:
    if os.path.exists(cwd):
        return RepositoryError(f"{cwd} is not a directory")
    return RepositoryError(f"{cwd} does not exist or is not a directory")


def _start(
    argv: list[str],
    program: str | None,
    cwd: Path,
    env: dict[str, str],
    input_bytes: bytes | None,
) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        argv,
        executable=program,  # argv[0] stays "git"
        cwd=cwd,
        env=env,
        stdin=subprocess.PIPE if input_bytes is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,  # its own group: a timeout ends all it started
    )


def git_program(search_path: str | None) -> str | None:
    """The ``git`` that ``execvp`` would run for ``search_path`` (a ``PATH`` value),
    looked up once per value: each call then execs it directly instead of trying
    every folder before it (a failed ``execve`` each). None where the lookup is
    left to ``execvp``: a relative folder on the path (its meaning follows the
    working directory), or no ``git`` found."""
    return _find_git(search_path if search_path is not None else os.defpath)


@functools.lru_cache(maxsize=8)
def _find_git(search_path: str) -> str | None:
    for folder in search_path.split(os.pathsep):
        if not os.path.isabs(folder):
            return None
        candidate = os.path.join(folder, "git")
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


def first_line(data: bytes) -> str:
    """The first non-empty line of git's output, without ``fatal:``/``error:``."""
    for raw in data.decode("utf-8", "replace").splitlines():
        line = raw.strip()
        for prefix in ("fatal: ", "error: "):
            if line.startswith(prefix):
                line = line[len(prefix) :]
        if line:
            return line
    return ""


def git_out(
    cwd: Path,
    *args: str,
    env: Mapping[str, str] | None = None,
    input_bytes: bytes | None = None,
) -> bytes:
    """``git ARGS``'s stdout; a failure is an error.

    Raises:
        GitCommandError: git exited non-zero (its first line of stderr is the message).
        GitUnavailableError: as ``run_git``.
    """
    done = run_git(cwd, *args, env=env, input_bytes=input_bytes)
    if done.returncode != 0:
        detail = first_line(done.stderr) or first_line(done.stdout) or f"exit {done.returncode}"
        raise GitCommandError(f"git {args[0]} failed in {cwd}: {detail}")
    return done.stdout


def git_text(cwd: Path, *args: str, env: Mapping[str, str] | None = None) -> str:
    """``git_out`` decoded and stripped (paths keep undecodable bytes as surrogates)."""
    return git_out(cwd, *args, env=env).decode("utf-8", "surrogateescape").strip()


def split_z(data: bytes) -> list[str]:
    """NUL-separated git output as strings, empty items dropped."""
    return [item.decode("utf-8", "surrogateescape") for item in data.split(b"\0") if item]


class Repository(Struct, frozen=True):
    """One work tree of a git repository, as autopilot uses it.

    Attributes:
        top: The top of the work tree (absolute).
        git_dir: This work tree's git directory (``.git``, or ``.git/worktrees/X``).
        common_dir: The repository's shared git directory (refs, objects).
    """

    top: Path
    git_dir: Path
    common_dir: Path
    filters: GitFilters | None = None
    """While a run watches the work tree: the filters it trusts (``workspace.filters``);
    not compared."""

    def __eq__(self, other: object) -> bool:
        if type(other) is not Repository:
            return NotImplemented
        return (self.top, self.git_dir, self.common_dir) == (
            other.top,
            other.git_dir,
            other.common_dir,
        )

    def __hash__(self) -> int:
        return hash((self.top, self.git_dir, self.common_dir))

    def _env(
        self, args: tuple[str, ...], env: Mapping[str, str] | None
    ) -> Mapping[str, str] | None:
        if self.filters is None:
            return env
        return {**self.filters.environment(self.top, args), **(env or {})} or None

    def run(
        self, *args: str, env: Mapping[str, str] | None = None, input_bytes: bytes | None = None
    ) -> subprocess.CompletedProcess[bytes]:
        """``run_git`` at the top of the work tree."""
        return run_git(self.top, *args, env=self._env(args, env), input_bytes=input_bytes)

    def out(
        self, *args: str, env: Mapping[str, str] | None = None, input_bytes: bytes | None = None
    ) -> bytes:
        """``git_out`` at the top of the work tree."""
        return git_out(self.top, *args, env=self._env(args, env), input_bytes=input_bytes)

    def text(self, *args: str, env: Mapping[str, str] | None = None) -> str:
        """``git_text`` at the top of the work tree."""
        return git_text(self.top, *args, env=self._env(args, env))

    def head(self) -> str | None:
        """The HEAD commit's sha, or None before the first commit."""
        done = self.run("rev-parse", "--verify", "--quiet", "HEAD^{commit}")
        sha = done.stdout.decode("ascii", "replace").strip()
        return sha if done.returncode == 0 and sha else None

    def branch(self) -> str | None:
        """The checked-out branch's short name, or None on a detached HEAD."""
        done = self.run("symbolic-ref", "--quiet", "--short", "HEAD")
        name = done.stdout.decode("utf-8", "surrogateescape").strip()
        return name if done.returncode == 0 and name else None

    def index_path(self) -> Path:
        """This work tree's index file (it may not exist yet)."""
        return self.git_dir / "index"

    def same_repository(self, other: Repository) -> bool:
        """True if both are work trees of one repository."""
        return self.common_dir == other.common_dir

    def has_staged_changes(self) -> bool:
        """True if the index differs from HEAD (or holds anything before a first commit)."""
        base = self.head() or "4b825dc642cb6eb9a060e54bf8d69288fbee4904"  # the empty tree
        done = self.run("diff-index", "--cached", "--quiet", "--no-ext-diff", base, "--")
        return done.returncode != 0

    def dirty_paths(self, *, untracked: bool = True, work_only: bool = False) -> list[str]:
        """Paths ``git status --porcelain`` lists (stashes never count).

        Args:
            untracked: Untracked files count too.
            work_only: Only the user's work: autopilot's own files (``OWN_FILES``)
                are left out.
        """
        mode = "--untracked-files=all" if untracked else "--untracked-files=no"
        spec = ("--", OWN_FILES) if work_only else ()
        data = self.out("status", "--porcelain=v1", "-z", "--no-renames", mode, *spec)
        return [entry[3:] for entry in split_z(data) if len(entry) > 3]


def open_repository(path: Path) -> Repository:
    """The work tree holding ``path``.

    Raises:
        RepositoryError: ``path`` is missing, not in a git repository, or in a bare one.
        GitUnavailableError: git is missing or timed out.
    """
    if not path.is_dir():
        raise RepositoryError(f"{path} does not exist or is not a directory")
    done = run_git(
        path,
        "rev-parse",
        "--path-format=absolute",
        "--is-bare-repository",
        "--git-dir",
        "--git-common-dir",
    )
    if done.returncode != 0:
        raise RepositoryError(f"{path} is not in a git repository")
    lines = done.stdout.decode("utf-8", "surrogateescape").splitlines()
    if len(lines) < 3:
        raise GitCommandError(f"git rev-parse gave no answer in {path}")
    if lines[0].strip() == "true":
        raise RepositoryError(f"{path} is a bare git repository (it has no working tree)")
    top = run_git(path, "rev-parse", "--show-toplevel")
    top_text = top.stdout.decode("utf-8", "surrogateescape").strip()
    if top.returncode != 0 or not top_text:
        raise RepositoryError(f"{path} is inside a git directory, not a working tree")
    return Repository(Path(top_text), Path(lines[1].strip()), Path(lines[2].strip()))
