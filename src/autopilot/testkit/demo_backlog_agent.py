"""The demo agent's work on one work item of a backlog run.

It reads the continuation message (``[autopilot]`` … ``prompt:``), writes the file the
item's prompt names, commits, and reports through ``autopilot report`` as a real agent
would with its shell tool — printing Claude Code stream-json as it goes, markers
included. On a first attempt it writes only the prompt's first sentence (a demo of a
check that fails and an item that is reopened); on a later attempt all of it.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from autopilot.testkit.streamjson import StreamJson

_FIELD_RE = re.compile(r"^(work-item|attempt): (.+)$", re.MULTILINE)
_CRITERION_RE = re.compile(r"^- ([A-Za-z0-9][A-Za-z0-9._-]*): ", re.MULTILINE)
_PATH_RE = re.compile(r"\b([\w./-]+\.md)\b")


@dataclass(frozen=True)
class Continuation:
    """What the demo agent reads from a continuation message."""

    item_id: str
    attempt: int
    criteria: tuple[str, ...]
    prompt: str
    reopened: bool


def read_continuation(message: str) -> Continuation | None:
    """The item of a continuation message, or None if ``message`` is not one."""
    if not message.startswith("[autopilot]\n"):
        return None
    head, _, prompt = message.partition("\nprompt:\n")
    fields = dict(_FIELD_RE.findall(head))
    if "work-item" not in fields:
        return None
    section = head.partition("acceptance-criteria:\n")[2]
    section = section.split("\nreopen-target:")[0].split("\nprevious-attempt:")[0]
    section = section.split("\nbefore-stop:")[0]
    attempt = fields.get("attempt", "1")
    return Continuation(
        item_id=fields["work-item"].strip(),
        attempt=int(attempt) if attempt.isdigit() else 1,
        criteria=tuple(_CRITERION_RE.findall(section)),
        prompt=prompt.strip(),
        reopened="previous-attempt:" in head,
    )


def work_on_item(
    item: Continuation, stream: StreamJson, emit: Callable[[str, float], None], delay: float
) -> str:
    """Do the item, commit, report; returns the final message."""
    emit(stream.text("[STAGE_PLAN: READ, WRITE, COMMIT, REPORT]\n[STAGE: READ]"), delay)
    path_match = _PATH_RE.search(item.prompt)
    target = Path(path_match.group(1) if path_match else f"notes/{item.item_id}.md")
    first_sentence = re.split(r"(?<=[.;])\s", item.prompt, maxsplit=1)[0]
    body = item.prompt if item.reopened or item.attempt > 1 else first_sentence
    emit(stream.text(f"[STAGE: WRITE]\n[TASK_START: write {target}]"), delay)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(f"# {item.item_id}\n\n{body}\n\nWritten by the demo agent.\n")
    emit(stream.tool_use("toolu_write", "Write", {"file_path": str(target.resolve())}), delay)
    emit(stream.tool_result("toolu_write", f"File created successfully at: {target}"), delay)
    emit(stream.text("[TASK_END: ok]\n[STAGE: COMMIT]"), delay)
    commit = f"git add -A && git commit -m 'demo: {item.item_id}'"
    emit(stream.tool_use("toolu_git", "Bash", {"command": commit}), delay)
    _run(["git", "add", "-A"])
    output = _run(["git", "commit", "-q", "-m", f"demo: {item.item_id} (attempt {item.attempt})"])
    emit(stream.tool_result("toolu_git", output or "committed"), delay)
    flags = [f"--criterion={cid}=pass" for cid in item.criteria]
    evidence = f"wrote {target}"
    report = ["report", "continue_next", f"--item={item.item_id}", *flags, f"--evidence={evidence}"]
    shown = "autopilot " + " ".join(report[:3] + flags) + f' --evidence "{evidence}"'
    emit(stream.text("[STAGE: REPORT]"), delay)
    emit(stream.tool_use("toolu_report", "Bash", {"command": shown}), delay)
    answer = _run([sys.executable, "-m", "autopilot", *report])
    emit(stream.tool_result("toolu_report", answer), delay)
    return f"Wrote {target} and reported continue_next for {item.item_id}."


def _run(argv: list[str]) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    return (done.stdout + done.stderr).strip()
