"""Where runs live, and how a RUN argument names one.

Runs root: ``$AUTOPILOT_RUNS_DIR``, else the platform's user state directory
(``platformdirs.user_state_path("autopilot") / "runs"``; on Linux
``~/.local/state/autopilot/runs``). It must resolve to a directory the user owns.
A run's folder is ``<runs-root>/<runId>/`` with ``runId = <label>-<startedAtEpochMs>``
(``docs/formats.md``). Machine state never lives in the work tree, where an agent can delete it.
"""

from __future__ import annotations

import errno
import os
import re

from autopilot.errors import RunNotFoundError, RunsRootError, UsageError
from autopilot.store.run_files import EVENTS_FILE, STATE_FILE, has_records
from autopilot.store.xdg import xdg_runs_root

TYPE_CHECKING = False  # as typing's, without importing typing at run time
if TYPE_CHECKING:
    from collections.abc import Iterable
    from pathlib import Path

    from autopilot.store.state_file import StateView

RUNS_DIR_ENV = "AUTOPILOT_RUNS_DIR"
# Patterns, compiled on first use by ``re``'s own cache (``list`` needs none of them).
_LABEL_RE = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"
_RUN_ID_RE = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}-\d{10,16}$"
_RUN_IDS_RE = r"(?:[A-Za-z0-9][A-Za-z0-9._-]{0,63}-\d{10,16}\n)+"
"""``_RUN_ID_RE`` of run ids each followed by a newline (which none may hold)."""


def runs_root(*, create: bool = True) -> Path:
    """Return the runs root, created (mode 0700) if ``create`` and missing.

    Raises:
        RunsRootError: the path exists but is not a directory, is not owned by this
            user, or is not writable; or it cannot be created.
    """
    from pathlib import Path

    return Path(runs_root_path(create=create))


def runs_root_path(*, create: bool = True) -> str:
    """``runs_root`` as a string, found and checked without pathlib (``list`` and
    ``stats`` of ended runs do not load it).

    Raises:
        RunsRootError: as ``runs_root``.
    """
    configured = os.environ.get(RUNS_DIR_ENV, "").strip()
    if configured:
        root = os.path.expanduser(configured)
        if not os.path.isabs(root):
            root = os.path.join(os.getcwd(), root)
    elif (quick := xdg_runs_root()) is not None:
        root = quick
    else:
        import platformdirs  # only where the platform's rule needs it

        root = os.path.join(platformdirs.user_state_dir("autopilot"), "runs")
    if create:
        try:
            os.makedirs(root, mode=0o700, exist_ok=True)
        except OSError as error:
            from pathlib import Path  # the root named as a path names it (no "//", "/.")

            shown = Path(root)
            if isinstance(error, FileExistsError):
                raise RunsRootError(f"runs root {shown} exists and is not a directory") from None
            raise RunsRootError(
                f"cannot create runs root {shown}: {error.strerror or error}"
            ) from None
    elif not _exists(root):
        return root
    root = os.path.realpath(root)
    if not os.path.isdir(root):
        raise RunsRootError(f"runs root {root} is not a directory")
    if hasattr(os, "getuid") and os.stat(root).st_uid != os.getuid():
        raise RunsRootError(f"runs root {root} is not owned by this user")
    if create and not os.access(root, os.W_OK | os.X_OK):
        raise RunsRootError(f"runs root {root} is not writable")
    return root


def _exists(path: str) -> bool:
    """``pathlib.Path.exists``: False where there is no such file, a part of the path
    is not a folder, a symbolic link loops or the path holds a NUL; any other error
    (permission denied) raised."""
    try:
        os.stat(path)
    except OSError as error:
        if error.errno in (errno.ENOENT, errno.ENOTDIR, errno.EBADF, errno.ELOOP):
            return False
        raise
    except ValueError:
        return False
    return True


def validate_label(label: str) -> str:
    """Check a run label: letters, digits, ``.``, ``_``, ``-``; at most 64 characters.

    Raises:
        UsageError: the label holds a separator, traversal, or other characters.
    """
    # fullmatch: "$" alone would let a trailing newline through.
    if not re.fullmatch(_LABEL_RE, label) or ".." in label:
        raise UsageError(
            f"invalid label {label!r}: use letters, digits, '.', '_' or '-' (at most 64)"
        )
    return label


def make_run_id(label: str, started_at_ms: int) -> str:
    """``<label>-<startedAtEpochMs>``, as the Node tool's run ids (``docs/formats.md``)."""
    return f"{validate_label(label)}-{started_at_ms}"


def is_valid_run_id(run_id: str) -> bool:
    """True for a well-formed run id (no separators, no traversal, no NUL)."""
    return bool(re.fullmatch(_RUN_ID_RE, run_id)) and ".." not in run_id


def valid_run_ids(run_ids: Iterable[str]) -> list[str]:
    """The well-formed ones of ``run_ids`` (``is_valid_run_id``), in their order:
    checked by one match over them all when every one is (``stats`` of thousands of
    runs), else one by one."""
    ids = list(run_ids)
    joined = "\n".join(ids) + "\n"
    if (
        ids
        and joined.count("\n") == len(ids)  # no id holds a newline
        and ".." not in joined
        and re.fullmatch(_RUN_IDS_RE, joined)
    ):
        return ids
    return [run_id for run_id in ids if is_valid_run_id(run_id)]


def run_dir(root: Path, run_id: str) -> Path:
    """The folder of ``run_id`` under ``root``.

    Raises:
        UsageError: ``run_id`` is not a well-formed run id.
    """
    if not is_valid_run_id(run_id):
        raise UsageError(f"invalid run id {run_id!r}")
    return root / run_id


def list_run_ids(root: Path) -> list[str]:
    """Run ids that have a folder with a ``state.json`` or an ``events.jsonl``, newest
    first (a run folder with only its log still replays)."""
    if not root.is_dir():
        return []
    found = [
        entry.name
        for entry in os.scandir(root)
        if entry.is_dir(follow_symlinks=False)
        and is_valid_run_id(entry.name)
        and has_records(entry.path)
    ]
    return sorted(found, key=started_at_of, reverse=True)


def started_at_of(run_id: str) -> int:
    """The epoch-ms start time encoded at the end of a run id."""
    return int(run_id.rsplit("-", 1)[1])


def _started_in(state: StateView) -> str | None:
    """The directory a ``--worktree`` run was started in: the same place in the
    checkout (``worktree.origin``) as its work tree is in its worktree."""
    place = state.extra.get("worktree")
    if not isinstance(place, dict) or state.cwd is None:
        return None
    path, origin = place.get("path"), place.get("origin")
    if not isinstance(path, str) or not isinstance(origin, str):
        return None
    from pathlib import Path

    try:
        return str(Path(origin) / Path(state.cwd).relative_to(path))
    except ValueError:
        return origin


def _armed_cwd(folder: Path) -> str | None:
    """The ``cwd`` of the ``armed`` event a run's log begins with, else None."""
    import json

    try:
        with open(folder / EVENTS_FILE, "rb") as log:
            first = json.loads(log.readline(65536))
    except (OSError, ValueError):
        return None
    if not isinstance(first, dict) or first.get("type") != "armed":
        return None
    cwd = first.get("cwd")
    return cwd if isinstance(cwd, str) else None


def _parent_of_lane(state: StateView) -> str | None:
    """The parallel run a lane's ``state.json`` names (``lane.parent``), else None."""
    lane = state.extra.get("lane")
    parent = lane.get("parent") if isinstance(lane, dict) else None
    return parent if isinstance(parent, str) else None


def project_of(cwd: Path) -> Path:
    """The project a command given in ``cwd`` means: the nearest of ``cwd`` and its
    parents holding a ``.autopilot/`` folder, else the top of the git work tree
    holding ``cwd`` (the folder with ``.git``), else ``cwd``. The search stops at
    the work tree's top and never takes the home directory above ``cwd`` (a stray
    ``~/.autopilot`` is not every project's). Reads folder names only, no git.
    """
    from pathlib import Path

    home = Path.home()
    for folder in (cwd, *cwd.parents):
        if folder != cwd and folder == home:
            break
        if (folder / ".autopilot").is_dir():
            return folder
        if (folder / ".git").exists():
            return folder
    return cwd


def resolve_run(root: Path, ref: str | None, *, project: Path | None = None) -> str:
    """Resolve a RUN argument to a run id.

    Args:
        root: The runs root.
        ref: A run id, a unique prefix of one, or None for ``project``'s run: its
            newest run that has not ended, else its newest run (``project`` None:
            any project). A ``--worktree`` run started in ``project`` counts; a
            parallel run's lane does not (its parallel run is meant).
        project: The directory whose newest run an omitted RUN means: a run started
            there, or in its project (``project_of``: a subfolder means its project).

    Raises:
        RunNotFoundError: nothing matches, or a prefix matches several runs.
    """
    from autopilot.store.state_file import read_state_view_quietly

    run_ids = list_run_ids(root)
    if ref is None:
        newest: str | None = None
        places = set() if project is None else {str(project), str(project_of(project))}
        for run_id in run_ids:
            state = read_state_view_quietly(root / run_id / STATE_FILE)
            if state is None:
                # Unreadable: named by its log's first event, so the command says what is
                # wrong with this project's run instead of "no runs".
                if project is None or _armed_cwd(root / run_id) in places:
                    newest = newest or run_id
                continue
            if project is not None and not places & {state.cwd, _started_in(state)}:
                continue
            if state is not None and _parent_of_lane(state) in run_ids:
                continue  # a parallel run's lane: "this project's run" is the parallel run
            if state is not None and not state.terminated:
                return run_id  # the active run is what "this project's run" means
            newest = newest or run_id
        if newest is not None:
            return newest
        where = f" for {project}" if project is not None else ""
        raise RunNotFoundError(f"no runs{where} in {root}")
    if "/" in ref or "\\" in ref or "\0" in ref or ".." in ref:
        raise RunNotFoundError(f"invalid run reference {ref!r}")
    if ref in run_ids:
        return ref
    matches = [run_id for run_id in run_ids if run_id.startswith(ref)]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise RunNotFoundError(f"no run matches {ref!r} in {root}")
    shown = ", ".join(matches[:3]) + (", …" if len(matches) > 3 else "")
    raise RunNotFoundError(f"{ref!r} matches {len(matches)} runs ({shown}); give more of the id")
