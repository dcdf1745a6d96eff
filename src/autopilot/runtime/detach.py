"""Detaching a run from the terminal: start its supervisor in a session of its own and
return at once (``docs/architecture.md``, "Detached runs"). The supervisor starts the daemon
(``runtime.supervisor``).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from autopilot.errors import EnvironmentProblem
from autopilot.runtime.supervision import SUPERVISOR_LOG
from autopilot.store.paths import run_dir
from autopilot.store.private import open_private


def spawn_supervisor(root: Path, run_id: str, *, adopt: int | None = None) -> int:
    """Start ``run_id``'s supervisor, detached; returns its pid.

    The supervisor forks away from the process started here, which exits at once, so
    nothing is left for this process to reap; it runs in a new session with stdin
    ``/dev/null`` and its output appended to ``supervisor.log`` in the run folder.

    Args:
        root: The runs root.
        run_id: The run (armed, not ended).
        adopt: A live daemon's pid, to supervise instead of starting a daemon.

    Raises:
        EnvironmentProblem: the supervisor could not be started.
    """
    folder = run_dir(root, run_id)
    argv = [sys.executable, "-m", "autopilot.runtime.supervisor", "--fork"]
    if adopt is not None:
        argv += ["--adopt", str(adopt)]
    argv += [str(root), run_id]
    try:
        fd = open_private(folder / SUPERVISOR_LOG, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        with open(fd, "ab") as log:
            done = subprocess.run(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=log,
                cwd=folder,
                start_new_session=True,
                timeout=60,
                check=False,
            )
    except (OSError, subprocess.TimeoutExpired) as error:
        raise EnvironmentProblem(f"cannot start the supervisor of {run_id}: {error}") from None
    text = done.stdout.decode("ascii", "replace").strip()
    if done.returncode != 0 or not text.isdigit():
        raise EnvironmentProblem(
            f"cannot start the supervisor of {run_id} (see {folder / SUPERVISOR_LOG})"
        )
    return int(text)
