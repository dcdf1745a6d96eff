"""A scripted fake agent for fast loop tests: ``python -m autopilot.testkit.fake_agent``.

It accepts Claude Code's arguments (``-p``, ``--output-format``, ``--resume ID``, …)
and ignores the ones it does not use, reads the prompt from stdin, and follows a JSON
script named by ``FAKE_AGENT_SCRIPT``::

    {"iterations": [{"steps": [STEP, ...]}, ...]}

The script for iteration N (``AUTOPILOT_ITERATION``) is ``iterations[N-1]``, or the
last one. With ``"select": "invocation"`` the Nth invocation (counted in
``<script>.count``) picks it instead, so a retried iteration can behave differently.
Steps (one key each, plus options):

* ``{"text": T}`` root assistant text; ``{"subagent_text": T}`` inside a subagent;
* ``{"tool": NAME, "input": {...}, "output": T}`` a tool call and its result;
* ``{"write_file": PATH, "content": T}`` writes the file (a Write tool call);
* ``{"shell": CMD}`` runs CMD (argv via ``sh -c`` in the test's own script only);
* ``{"result": T, "is_error": false, "cost_usd": 0.01, "input_tokens": 10,
  "output_tokens": 5, "api_error_status": null}`` the final result line;
* ``{"assistant_error": KIND, "text": T}`` an assistant line with an ``error`` field;
* ``{"rate_limit_event": {"status": "rejected", "resetsAt": EPOCH_S}}``;
* ``{"raw": LINE}`` prints LINE as is; ``{"raw_hex": HEX}`` prints bytes (bad UTF-8);
* ``{"big_line": N}`` an assistant text line about N bytes long;
* ``{"plain": T}`` a plain text line (for ``--agent command``);
* ``{"echo_prompt": true}`` prints the prompt it was given, as root text;
* ``{"stderr": T}``; ``{"sleep": S}``; ``{"exit": CODE}``;
* ``{"hold_stdout": S}`` leaves a grandchild holding stdout open for S seconds;
* ``{"stop_self": true}`` sends itself SIGSTOP; ``{"ignore_sigterm": true}``.

Without a result step and an exit step it exits 0 after its steps.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from autopilot.testkit.streamjson import StreamJson, dumps


def _out(line: str | bytes) -> None:
    data = line if isinstance(line, bytes) else line.encode("utf-8", "surrogateescape")
    sys.stdout.buffer.write(data + b"\n")
    sys.stdout.buffer.flush()


def _pick(script: dict[str, Any], script_path: Path) -> dict[str, Any]:
    iterations = script.get("iterations") or [{"steps": []}]
    if script.get("select") == "invocation":
        counter = script_path.with_name(script_path.name + ".count")
        count = int(counter.read_text()) + 1 if counter.exists() else 1
        counter.write_text(str(count))
        index = count
    else:
        index = int(os.environ.get("AUTOPILOT_ITERATION", "1") or 1)
    return dict(iterations[min(index, len(iterations)) - 1])


def _arg_after(flag: str) -> str | None:
    args = sys.argv[1:]
    if flag in args and args.index(flag) + 1 < len(args):
        return args[args.index(flag) + 1]
    return None


def main() -> int:
    """Run the script; returns the exit code."""
    script_path = Path(os.environ["FAKE_AGENT_SCRIPT"])
    script = json.loads(script_path.read_text())
    chosen = _pick(script, script_path)
    prompt = "" if sys.stdin is None or sys.stdin.isatty() else sys.stdin.read()
    iteration = os.environ.get("AUTOPILOT_ITERATION", "1")
    session = (
        _arg_after("--resume")
        or chosen.get("session_id")
        # A UUID, as Claude Code's session ids are: one per iteration, reproducible.
        or str(uuid.uuid5(uuid.NAMESPACE_URL, f"autopilot-fake-session-{iteration}"))
    )
    stream = StreamJson(session, os.getcwd())
    if not chosen.get("no_init"):
        _out(stream.init())
    exit_code = 0
    for number, step in enumerate(chosen.get("steps", [])):
        tool_id = f"toolu_fake{iteration}_{number}"
        if "text" in step and "assistant_error" not in step:
            _out(stream.text(step["text"]))
        elif "subagent_text" in step:
            _out(stream.text(step["subagent_text"], parent="toolu_parent"))
        elif "assistant_error" in step:
            line = json.loads(stream.text(step.get("text", "API Error")))
            line["error"] = step["assistant_error"]
            _out(dumps(line))
        elif "tool" in step:
            _out(stream.tool_use(tool_id, step["tool"], step.get("input", {})))
            _out(stream.tool_result(tool_id, step.get("output", "ok")))
        elif "write_file" in step:
            path = Path(step["write_file"])
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(step.get("content", ""))
            _out(stream.tool_use(tool_id, "Write", {"file_path": str(path.resolve())}))
            _out(stream.tool_result(tool_id, f"File created successfully at: {path}"))
        elif "shell" in step:
            done = subprocess.run(
                ["sh", "-c", step["shell"]], capture_output=True, text=True, check=False
            )
            _out(stream.tool_use(tool_id, "Bash", {"command": step["shell"]}))
            _out(stream.tool_result(tool_id, (done.stdout + done.stderr)[-2000:]))
        elif "result" in step:
            _out(
                stream.result(
                    step["result"],
                    is_error=bool(step.get("is_error", False)),
                    cost_usd=float(step.get("cost_usd", 0.0)),
                    input_tokens=int(step.get("input_tokens", 0)),
                    output_tokens=int(step.get("output_tokens", 0)),
                    api_error_status=step.get("api_error_status"),
                )
            )
        elif "rate_limit_event" in step:
            _out(
                dumps(
                    {
                        "type": "rate_limit_event",
                        "rate_limit_info": step["rate_limit_event"],
                        "session_id": session,
                    }
                )
            )
        elif "raw" in step:
            _out(step["raw"])
        elif "raw_hex" in step:
            _out(bytes.fromhex(step["raw_hex"]))
        elif "big_line" in step:
            _out(stream.text("x" * int(step["big_line"])))
        elif "plain" in step:
            _out(step["plain"])
        elif "echo_prompt" in step:
            _out(stream.text(prompt))
        elif "stderr" in step:
            sys.stderr.write(step["stderr"] + "\n")
            sys.stderr.flush()
        elif "sleep" in step:
            time.sleep(float(step["sleep"]))
        elif "hold_stdout" in step:
            subprocess.Popen(
                ["sleep", str(step["hold_stdout"])], stdout=sys.stdout, stderr=sys.stderr
            )
        elif "stop_self" in step:
            os.kill(os.getpid(), signal.SIGSTOP)
        elif "ignore_sigterm" in step:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        elif "exit" in step:
            exit_code = int(step["exit"])
            break
    return exit_code


if __name__ == "__main__":
    sys.exit(main())
