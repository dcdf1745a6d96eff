"""Content filters a run's agent planted are never run by autopilot's own git calls.

A repository's config can name programs git runs on file content: ``filter.<name>.clean``
when it reads a file (``git status`` of a file whose timestamps changed, ``git add``),
``smudge`` when it writes one, ``process`` for both. An agent can write such a filter
into ``.git/config`` with a ``.gitattributes`` that applies it, and the driver's own
``git status`` and checkpoint ``git add`` would then run the agent's program, outside
the agent's process group, once per call. Hooks and ``core.fsmonitor`` are off in every
call (``repo.HARDENING``); a filter cannot be turned off by one option, since it is
named. So ``FilterGuard`` records the filters the repository had when autopilot started
watching it (the user's own, git-lfs say, keep working; a run keeps the record in its
folder, so its relaunched driver trusts the same ones) and, for each call that reads
or writes file content, turns off every filter defined since or changed, through
``GIT_CONFIG_COUNT``/``GIT_CONFIG_KEY_n``/``GIT_CONFIG_VALUE_n`` (git 2.31 or later).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from pathlib import Path

from autopilot.errors import AutopilotError
from autopilot.store.private import write_private
from autopilot.workspace.repo import Repository, run_git

CONTENT_COMMANDS = frozenset(
    {"status", "add", "diff", "update-index", "write-tree", "read-tree", "checkout-index"}
)
"""The git commands autopilot runs that may run a content filter."""

_FILTER_KEY = re.compile(r"filter\.(.+)\.(clean|smudge|process)", re.DOTALL)
_TURNED_OFF = (("clean", ""), ("smudge", ""), ("process", ""), ("required", "false"))


def filter_config(cwd: Path) -> dict[str, str] | None:
    """Every ``filter.<name>.clean|smudge|process`` the config of ``cwd``'s repository
    sets (includes followed), key → value; None when git cannot tell."""
    try:
        done = run_git(cwd, "config", "-z", "--get-regexp", r"^filter\..*\.(clean|smudge|process)$")
    except AutopilotError:
        return None
    if done.returncode not in (0, 1):  # 1: no such key
        return None
    found: dict[str, str] = {}
    for item in done.stdout.split(b"\0"):
        key, _, value = item.decode("utf-8", "surrogateescape").partition("\n")
        if _FILTER_KEY.fullmatch(key):
            found[key] = value
    return found


def overrides(trusted: dict[str, str], current: dict[str, str]) -> dict[str, str]:
    """The environment that turns off each filter of ``current`` not as in ``trusted``.

    Args:
        trusted: The filters the repository had at first (``filter_config``).
        current: Its filters now.

    Returns:
        ``GIT_CONFIG_COUNT`` and ``GIT_CONFIG_KEY_n``/``GIT_CONFIG_VALUE_n`` setting
        ``clean``, ``smudge`` and ``process`` to nothing and ``required`` to false for
        each such filter; empty when there is none.
    """
    names = sorted(
        {
            match.group(1)
            for key, value in current.items()
            if trusted.get(key) != value and (match := _FILTER_KEY.fullmatch(key))
        }
    )
    env: dict[str, str] = {}
    pairs = [(f"filter.{name}.{key}", value) for name in names for key, value in _TURNED_OFF]
    for number, (key, value) in enumerate(pairs):
        env[f"GIT_CONFIG_KEY_{number}"] = key
        env[f"GIT_CONFIG_VALUE_{number}"] = value
    if pairs:
        env["GIT_CONFIG_COUNT"] = str(len(pairs))
    return env


class FilterGuard:
    """The filters of one repository as autopilot first saw them.

    The config is read again (one ``git config`` call) only when one of its files
    changed (size, time or inode: git replaces the file to write it) or one of them
    includes another, so a mark or checkpoint of an untouched repository starts no
    extra git process.

    Args:
        cwd: A folder of the repository's work tree; its filters are read now (one
            git call, two without ``work_tree``), before the agent runs.
        record: Where the run keeps the filters it trusts (``RunDir.git_filters``):
            read when there, so a driver relaunched after a crash trusts what the
            first one found, not what the agent planted meanwhile; else written.
        work_tree: The work tree's git directories, when the caller knows them
            already (one git call fewer); None: asked of git.
    """

    def __init__(
        self, cwd: Path, record: Path | None = None, work_tree: Repository | None = None
    ) -> None:
        self._files = _config_files(cwd, work_tree)
        # Each file's identity when it was last read, and whether it included another.
        self._includes: dict[Path, tuple[tuple[int, int, int, int], bool]] = {}
        remembered = _read_record(record) if record is not None else None
        found = filter_config(cwd) if remembered is None else None
        self.trusted = remembered if remembered is not None else found or {}
        if record is not None and found is not None:
            with contextlib.suppress(OSError):
                write_private(record, json.dumps(self.trusted, sort_keys=True).encode())
        # What the filters were read for; None: read them at the first call (a
        # relaunch trusts the record, and the config may have changed since).
        self._seen: tuple[object, ...] | None = (
            None if remembered is not None else self._signature()
        )
        self._env: dict[str, str] = {}

    def environment(self, cwd: Path, args: tuple[str, ...]) -> dict[str, str]:
        """What to add to the environment of ``git ARGS`` in ``cwd``: nothing for a
        command that runs no filter; else the overrides of the filters not trusted."""
        if not args or args[0] not in CONTENT_COMMANDS:
            return {}
        seen = self._signature()
        if seen is None or seen != self._seen:
            current = filter_config(cwd)
            self._env = overrides(self.trusted, current) if current else {}
            self._seen = seen
        return dict(self._env)

    def _signature(self) -> tuple[object, ...] | None:
        """Each config file's identity now; None when it cannot be trusted to tell a
        change (a file includes another, or the files are unknown)."""
        if not self._files:
            return None
        found: list[object] = []
        for path in self._files:
            try:
                info = os.stat(path)
                # ctime too: a rewrite in place at the same size can set mtime back.
                identity = (info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)
                known = self._includes.get(path)
                # Read again only once changed: an unchanged identity is an unchanged
                # file, as the signature itself takes it.
                if known is None or known[0] != identity:
                    known = (identity, b"include" in path.read_bytes().lower())
                    self._includes[path] = known
                if known[1]:
                    return None
            except FileNotFoundError:
                found.append(None)
                continue
            except OSError:
                return None
            found.append(identity)
        return tuple(found)


_MAX_RECORD_BYTES = 1024 * 1024


def _read_record(path: Path) -> dict[str, str] | None:
    """The filters a run recorded, or None when there is no usable record."""
    try:
        with path.open("rb") as handle:
            data = json.loads(handle.read(_MAX_RECORD_BYTES + 1))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    return {str(k): v for k, v in data.items() if isinstance(v, str) and _FILTER_KEY.fullmatch(k)}


def _config_files(cwd: Path, work_tree: Repository | None = None) -> tuple[Path, ...]:
    """The files git reads config from for ``cwd``: system, global, the repository's
    and its worktree's (``git config --help``, FILES); empty when git cannot tell.
    ``work_tree``: its git directories, known already."""
    if work_tree is not None:
        common, own = work_tree.common_dir, work_tree.git_dir
    else:
        try:
            done = run_git(
                cwd, "rev-parse", "--path-format=absolute", "--git-common-dir", "--git-dir"
            )
        except AutopilotError:
            return ()
        lines = done.stdout.decode("utf-8", "surrogateescape").splitlines()
        if done.returncode != 0 or len(lines) < 2:
            return ()
        common, own = Path(lines[0]), Path(lines[1])
    home = Path(os.environ.get("HOME") or "~").expanduser()
    xdg = Path(os.environ.get("XDG_CONFIG_HOME") or home / ".config")
    system = os.environ.get("GIT_CONFIG_SYSTEM") or "/etc/gitconfig"
    global_ = os.environ.get("GIT_CONFIG_GLOBAL")
    files = [
        Path(system),
        *((Path(global_),) if global_ else (home / ".gitconfig", xdg / "git/config")),
    ]
    return (*files, common / "config", own / "config.worktree")
