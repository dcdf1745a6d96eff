"""A local webhook on 127.0.0.1 for apprise's ``json://``: it records each JSON body and
can hang until released."""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Endpoint:
    """The webhook: its apprise URL and what it received."""

    url: str
    bodies: list[dict[str, Any]] = field(default_factory=list)
    hang: threading.Event | None = None
    got: threading.Event = field(default_factory=threading.Event)


@contextlib.contextmanager
def serve() -> Iterator[Endpoint]:
    """Run the webhook for the duration of the block."""
    box: dict[str, Endpoint] = {}

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length) or b"{}")
            point = box["endpoint"]
            point.bodies.append(body)
            point.got.set()
            if point.hang is not None:
                point.hang.wait(30)
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    box["endpoint"] = Endpoint(f"json://127.0.0.1:{server.server_address[1]}/hook")
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield box["endpoint"]
    finally:
        if box["endpoint"].hang is not None:
            box["endpoint"].hang.set()
        server.shutdown()
        server.server_close()
