"""A disk that fills up part-way through a write, made real with ``RLIMIT_FSIZE``
(the kernel then writes what fits and refuses the rest, as on a full disk)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from autopilot.store.events import EventLog, read_events

_WRITER = textwrap.dedent(
    """
    import resource, signal, sys
    from pathlib import Path
    from autopilot.store.events import EventLog
    path, room = Path(sys.argv[1]), int(sys.argv[2])
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a refused write, not a killed writer
    limit = path.stat().st_size + room
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))
    log = EventLog(path, "run-1", lambda: 5)
    written = log.emit_all(
        [
            ("iteration_end", {"iteration": 2, "excerpt": "x" * 200}),
            ("decision_applied", {"iteration": 2, "attempt": "iter-0002"}),
        ]
    )
    print(written)
    """
)


@pytest.mark.parametrize("stderr_full", [False, True], ids=["stderr-free", "stderr-full"])
def test_a_step_cut_by_a_full_disk_leaves_none_of_its_events(
    tmp_path: Path, stderr_full: bool
) -> None:
    path = tmp_path / "events.jsonl"
    log = EventLog(path, "run-1", lambda: 1)
    log.emit("iteration_start", iteration=2)
    log.close()
    before = path.read_bytes()
    # A daemon's stderr is a file on the same disk: the warning cannot be written either.
    err = tmp_path / "daemon.err"
    err.write_bytes(b"x" * (len(before) + 1000) if stderr_full else b"")
    with err.open("ab") as stderr:
        # Room for the first line and part of the second: a short write, then EFBIG.
        done = subprocess.run(
            [sys.executable, "-c", _WRITER, str(path), "300"],
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            timeout=60,
            check=False,
        )
    assert done.returncode == 0, err.read_text()[-2000:]
    assert done.stdout.strip() == "[None, None]"
    assert ("cannot append to" in err.read_text()) is not stderr_full
    assert path.read_bytes() == before  # all of the step's events or none
    # The log takes events again once there is room.
    log = EventLog(path, "run-1", lambda: 9)
    log.emit("abort", reason="disk_full")
    log.close()
    assert [e["type"] for e in read_events(path)] == ["iteration_start", "abort"]
