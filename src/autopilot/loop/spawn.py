"""Start an agent on the fast path: ``vfork`` and exec, so that it cannot outlive the
driver. In a run's cgroup that a sentinel watches (``loop.sentinel``), the driver steps
into the cgroup for the moment of the spawn and the agent is started as is: the
sentinel ends the cgroup if the driver dies. Elsewhere its parent-death signal is set
by ``setpriv`` rather than by Python code between fork and exec.

Python forks (it cannot ``vfork``) as soon as ``subprocess.Popen`` is given a
``preexec_fn``; a driver-sized process then takes about 10 ms to start a program
instead of well under one. The agent's parent-death signal (``PR_SET_PDEATHSIG``,
so it dies with the driver) survives ``execve``, so util-linux's ``setpriv
--pdeathsig KILL -- PROGRAM ARGS`` can set it and exec the agent in place: same pid,
same argv, same environment. A run's cgroup is joined the same way, by ``/bin/sh``
writing its own pid to ``cgroup.procs`` before it execs ``setpriv``: the agent is in
the cgroup before it can start anything. Where ``setpriv`` is missing, or cannot set
the signal (util-linux before 2.33 has no ``--pdeathsig``; a sandbox may refuse the
``prctl``), the caller keeps its ``preexec_fn``: one trial run per driver decides.

A driver killed in the moment between the spawn and ``setpriv``'s ``prctl`` leaves
the agent running without the signal (a ``preexec_fn`` would have seen it and exited);
what a dead driver left is ended by the relaunch or the supervisor all the same, by
cgroup, run id and process group (``loop.leftovers.end_leftovers``).

The program is looked up here first, as ``subprocess`` would, so that one that
cannot be started is still an ``OSError`` of the driver (``cannot start X: No such
file or directory``) and not ``setpriv``'s exit status 127.
"""

from __future__ import annotations

import errno
import functools
import os
import subprocess
import sys
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path

from autopilot.loop.agent_group import child_setup
from autopilot.loop.cgroup import AgentCgroup, cgroup_likely

_SYSTEM_DIRS = ("/usr/bin", "/bin", "/usr/sbin", "/sbin", "/usr/local/bin")
"""Where ``setpriv`` is looked for: never on the agent's or the project's PATH."""


_early: list[threading.Thread] = []
"""The thread ``start_trial`` started, if any (``setpriv_path`` waits for it)."""


def start_trial() -> None:
    """Begin ``setpriv_path``'s trial in a thread (two execs, a few ms), so that a
    driver armed meanwhile finds it done at its first spawn. Once only; not where the
    driver's agents will likely be born in a cgroup a sentinel watches (``setpriv`` is
    then tried at the first spawn that needs it, if any)."""
    if not _early and not cgroup_likely(os.environ):
        thread = threading.Thread(target=_setpriv_path, name="setpriv-trial", daemon=True)
        _early.append(thread)
        thread.start()


def setpriv_path() -> str | None:
    """util-linux's ``setpriv`` in a system folder, if it sets a parent-death signal
    here; None where it does not (not Linux, not installed, too old, refused)."""
    for thread in _early:
        thread.join()
    return _setpriv_path()


@functools.cache
def _setpriv_path() -> str | None:
    if not sys.platform.startswith("linux"):
        return None
    return find_setpriv(_SYSTEM_DIRS)


def find_setpriv(folders: Iterable[str]) -> str | None:
    """The first ``setpriv`` in ``folders``, if ``setpriv --pdeathsig KILL`` runs a
    program with it (tried once: ``setpriv --version`` under it); else None."""
    for folder in folders:
        candidate = os.path.join(folder, "setpriv")
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate if _sets_pdeathsig(candidate) else None
    return None


_TRIAL_TIMEOUT_SECONDS = 10.0


def _sets_pdeathsig(setpriv: str) -> bool:
    try:
        done = subprocess.run(
            [setpriv, "--pdeathsig", "KILL", "--", setpriv, "--version"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=_TRIAL_TIMEOUT_SECONDS,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


def check_program(program: str, *, cwd: Path, env: Mapping[str, str]) -> None:
    """Raise what starting ``program`` would raise if it cannot be started.

    Looked up as ``subprocess`` and ``execvp`` look it up: a name with a slash is a
    path (relative to ``cwd``), any other name is searched on ``env``'s ``PATH``.

    Raises:
        FileNotFoundError: no such file (on any ``PATH`` entry).
        PermissionError: it exists but is not an executable file.
    """
    if os.sep in program:
        candidates = [program]
    else:
        candidates = [os.path.join(folder or ".", program) for folder in os.get_exec_path(env)]
    refused = False
    for candidate in candidates:
        path = os.path.join(cwd, candidate)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return
        refused = refused or os.path.exists(path)
    code = errno.EACCES if refused else errno.ENOENT
    raise OSError(code, os.strerror(code), program)


_JOIN_CGROUP = '{ echo 0 >"$0"; } 2>/dev/null; exec "$@"'
"""``sh -c`` script: move this process into the cgroup whose ``cgroup.procs`` is
``$0`` (a failure is ignored, as the ``preexec_fn`` ignores it), then exec the rest."""


def fast_spawn_argv(
    argv: list[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    cgroup_procs: Path | None = None,
) -> list[str] | None:
    """The argv that starts ``argv`` with a parent-death signal (and in the cgroup
    whose ``cgroup.procs`` file is ``cgroup_procs``) and no ``preexec_fn``, or None
    where only a ``preexec_fn`` can do that.

    Raises:
        OSError: the program cannot be started (see ``check_program``).
    """
    setpriv = setpriv_path()
    if setpriv is None or not argv:
        return None
    if cgroup_procs is not None and not os.access(_SH, os.X_OK):
        return None
    check_program(argv[0], cwd=cwd, env=env)
    fast = [setpriv, "--pdeathsig", "KILL", "--", *argv]
    if cgroup_procs is None:
        return fast
    return [_SH, "-c", _JOIN_CGROUP, str(cgroup_procs), *fast]


_SH = "/bin/sh"


def start_agent(
    argv: list[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    stdin_data: bytes | None,
    cgroup: AgentCgroup | None,
    guarded: bool = False,
) -> subprocess.Popen[bytes]:
    """Start an agent in a session of its own, with pipes for its output (and its
    input, when ``stdin_data`` is not None), on the fastest path that keeps it from
    outliving this process.

    In the run's cgroup this process moves in for the moment of the spawn, so the agent
    is born there (``AgentCgroup.enter``), and back out. Where a sentinel watches that
    cgroup (``guarded``, ``loop.sentinel``), that is all: the agent is started as is.
    Otherwise ``setpriv`` gives it its parent-death signal (vfork, not fork); where the
    move is refused, ``sh`` joins the cgroup before it execs ``setpriv`` (an exec more
    an agent); where there is no usable ``setpriv``, a ``preexec_fn`` does both.

    Raises:
        OSError: the program cannot be started.
    """
    entered = guarded and cgroup is not None and cgroup.usable and cgroup.enter()
    fast = argv if entered else fast_spawn_argv(argv, cwd=cwd, env=env)
    if not entered and fast is not None and cgroup is not None:
        # A guarded spawn that was refused the move does not try it again.
        entered = not guarded and cgroup.usable and cgroup.enter()
        if not entered:
            procs = cgroup.path / "cgroup.procs"
            fast = fast_spawn_argv(argv, cwd=cwd, env=env, cgroup_procs=procs)
    try:
        return subprocess.Popen(
            fast or argv,
            cwd=cwd,
            env=dict(env),
            stdin=subprocess.PIPE if stdin_data is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            preexec_fn=None if fast else child_setup(cgroup),  # noqa: PLW1509 - os calls only
            close_fds=True,
        )
    finally:
        if entered:
            assert cgroup is not None
            cgroup.leave()
