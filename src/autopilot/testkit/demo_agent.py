"""The built-in scripted agent of ``autopilot demo``.

Given a backlog run's continuation message on stdin, it works on that work item and
reports through ``autopilot report`` (``demo_backlog_agent``). Otherwise it reads
``BACKLOG.md`` in its working directory, takes the first unchecked item (``- [ ] …``),
writes a note for it under ``notes/``, ticks it off and commits. Either way it prints
Claude Code stream-json as it goes (so the demo exercises the real parser); with
nothing left it answers ``<promise>COMPLETE</promise>``.
``AUTOPILOT_DEMO_DELAY`` sets the pause between steps in seconds (default 0.4).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import uuid
from pathlib import Path

from autopilot.testkit.demo_backlog_agent import read_continuation, work_on_item
from autopilot.testkit.streamjson import StreamJson

_ITEM_RE = re.compile(r"^- \[ \] (.+)$", re.MULTILINE)


def _emit(line: str, delay: float) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()
    time.sleep(delay)


def _git(*args: str) -> str:
    done = subprocess.run(["git", *args], capture_output=True, text=True, check=False)
    return (done.stdout + done.stderr).strip()


def main() -> int:
    """Do one backlog item; returns 0."""
    prompt = sys.stdin.read() if not sys.stdin.isatty() else ""
    delay = float(os.environ.get("AUTOPILOT_DEMO_DELAY", "0.4"))
    stream = StreamJson(str(uuid.uuid4()), os.getcwd(), model="demo-scripted")
    _emit(stream.init(), delay)
    continuation = read_continuation(prompt)
    if continuation is not None:
        final = work_on_item(continuation, stream, _emit, delay)
        _emit(stream.text(final), delay)
        _emit(stream.result(final, cost_usd=0.0012, input_tokens=2400, output_tokens=180), 0)
        return 0
    backlog = Path("BACKLOG.md")
    text = backlog.read_text() if backlog.exists() else ""
    _emit(stream.tool_use("toolu_read", "Read", {"file_path": str(backlog.resolve())}), delay)
    _emit(stream.tool_result("toolu_read", text[:2000]), delay)
    match = _ITEM_RE.search(text)
    if match is None:
        final = "Every backlog item is checked off and committed. <promise>COMPLETE</promise>"
        _emit(stream.text(final), delay)
        _emit(stream.result(final, cost_usd=0.0004, input_tokens=900, output_tokens=40), 0)
        return 0
    item = match.group(1).strip()
    slug = re.sub(r"[^a-z0-9]+", "-", item.lower()).strip("-")[:40] or "item"
    _emit(stream.text(f"Next backlog item: {item}. I'll write it up and commit."), delay)
    note = Path("notes") / f"{slug}.md"
    note.parent.mkdir(exist_ok=True)
    note.write_text(f"# {item}\n\nDone by the demo agent.\n")
    _emit(stream.tool_use("toolu_write", "Write", {"file_path": str(note.resolve())}), delay)
    _emit(stream.tool_result("toolu_write", f"File created successfully at: {note}"), delay)
    backlog.write_text(text.replace(f"- [ ] {item}", f"- [x] {item}", 1))
    command = f"git add -A && git commit -m 'demo: {item}'"
    _emit(stream.tool_use("toolu_bash", "Bash", {"command": command}), delay)
    _git("add", "-A")
    output = _git("commit", "-q", "-m", f"demo: {item}")
    _emit(stream.tool_result("toolu_bash", output or "committed"), delay)
    final = f"Finished '{item}' and committed it. Items remain, so not complete yet."
    _emit(stream.text(final), delay)
    _emit(stream.result(final, cost_usd=0.0012, input_tokens=2400, output_tokens=180), 0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
