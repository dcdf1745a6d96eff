"""``python -m autopilot.testkit.model_server``: serve a script until SIGINT/SIGTERM."""

from __future__ import annotations

import argparse
import os
import signal
import tempfile
import threading
from collections.abc import Sequence

from autopilot.testkit.model_server.library import SCRIPTS
from autopilot.testkit.model_server.server import ModelServer


def write_port_file(path: str, port: int) -> None:
    """Write ``port`` and a newline to ``path`` atomically (temp file, fsync, rename)."""
    directory = os.path.dirname(os.path.abspath(path))
    fd, temp = tempfile.mkstemp(dir=directory, prefix=".port-")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(f"{port}\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(temp, path)
    except BaseException:
        os.unlink(temp)
        raise


def main(argv: Sequence[str] | None = None) -> int:
    """Serve until SIGINT or SIGTERM; returns the exit code (2 for bad arguments)."""
    parser = argparse.ArgumentParser(
        prog="python -m autopilot.testkit.model_server",
        description="Serve scripted Anthropic, OpenAI (Responses and Chat Completions) "
        "and Gemini model APIs on 127.0.0.1.",
    )
    parser.add_argument("--script", default="default", choices=sorted(SCRIPTS))
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--port-file", help="write the chosen port here")
    parser.add_argument("--log", action="store_true", help="log requests to stderr")
    parser.add_argument(
        "--fail-for-seconds",
        type=float,
        metavar="N",
        help="answer 429 for N seconds from the first model request (resetting then), "
        "then follow the script",
    )
    args = parser.parse_args(argv)
    if args.fail_for_seconds is not None and args.fail_for_seconds < 0:
        parser.error("--fail-for-seconds must not be negative")
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    server = ModelServer(
        args.script,
        host=args.host,
        port=args.port,
        log=args.log,
        fail_for_seconds=args.fail_for_seconds,
    )
    with server:
        if args.port_file:
            write_port_file(args.port_file, server.port)
        print(f"listening on {server.base_url}", flush=True)
        while not stop.wait(0.5):
            pass
    return 0
