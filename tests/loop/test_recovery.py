"""Recovery reads an interrupted attempt's saved output in bounded memory."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from autopilot.agents.claude import ClaudeAdapter
from autopilot.loop.cut_short import recover_attempt
from autopilot.testkit.streamjson import StreamJson

_MIB = 1024 * 1024


def _attempt(folder: Path, bulk_bytes: int) -> Path:
    """An attempt folder whose stdout.log holds a line of ``bulk_bytes`` (a hole in a
    sparse file, so it costs no disk) between the init line and the result."""
    folder.mkdir()
    (folder / "prompt.md").write_text("work")
    stream = StreamJson("s-1", str(folder))
    with (folder / "stdout.log").open("wb") as out:
        out.write((stream.init() + "\n").encode())
        out.write(b'{"type":"assistant","message":{"content":[{"type":"text","text":"')
        out.seek(bulk_bytes, 1)
        out.write(b'"}]}}\n')
        result = stream.result("all done COMPLETE", input_tokens=1200, output_tokens=34)
        out.write((result + "\n").encode())
    return folder


def test_the_result_after_a_line_over_the_cap_is_found(tmp_path: Path) -> None:
    folder = _attempt(tmp_path / "iter-0001", 40 * _MIB)
    recovered = recover_attempt(folder, ClaudeAdapter())
    assert recovered is not None
    report = recovered.report
    assert report.final_message == "all done COMPLETE"
    assert (report.input_tokens, report.output_tokens) == (1200, 34)


_MEASURE = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from autopilot.agents.claude import ClaudeAdapter
    from autopilot.loop.cut_short import recover_attempt

    def kib(field):
        for line in open("/proc/self/status"):
            if line.startswith(field + ":"):
                return int(line.split()[1])

    before = kib("VmRSS")
    recovered = recover_attempt(Path(sys.argv[1]), ClaudeAdapter())
    print(recovered.report.final_message, (kib("VmHWM") - before) // 1024)
    """
)


def test_recovery_memory_does_not_grow_with_the_line(tmp_path: Path) -> None:
    # A 256 MiB line once cost twice its size (and quadratic time) to skip.
    folder = _attempt(tmp_path / "iter-0001", 256 * _MIB)
    done = subprocess.run(
        [sys.executable, "-c", _MEASURE, str(folder)],
        capture_output=True,
        text=True,
        check=True,
    )
    message, grown_mib = done.stdout.rsplit(" ", 1)
    assert message == "all done COMPLETE"
    assert int(grown_mib) < 64


def test_a_recovered_attempt_whose_agent_was_refused_its_key_is_fatal(tmp_path: Path) -> None:
    """A crash after the agent's final result: its verdict counts as the live driver's
    would (``observe.verdict_of``), so a refused key ends the run instead of retrying."""
    from autopilot.loop.cut_short import attempt_from_output
    from tests.fakes import claude_lines

    folder = tmp_path / "iter-0001"
    folder.mkdir()
    (folder / "prompt.md").write_text("work")
    lines = claude_lines("Invalid API key · Please run /login", is_error=True, api_error_status=401)
    (folder / "stdout.log").write_text("\n".join(lines) + "\n")
    attempt = attempt_from_output(1, folder, ClaudeAdapter(sys.executable), 1_800_000_000_000)
    assert (attempt.agent_failed, attempt.fatal, attempt.usage_limited) == (True, True, False)
    assert attempt.agent_error is not None and "Invalid API key" in attempt.agent_error
