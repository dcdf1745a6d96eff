"""HTTP and SSE helpers for driving the scripted model server over real sockets."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import autopilot
from autopilot.testkit.model_server import ModelServer

Response = tuple[int, dict[str, str], bytes]

MODULE = [sys.executable, "-m", "autopilot.testkit.model_server"]
"""The model server's command line."""


def module_env() -> dict[str, str]:
    """This environment with this checkout's ``src`` first on ``PYTHONPATH``."""
    src = str(Path(autopilot.__file__).resolve().parents[1])
    return {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}


@contextmanager
def served(port_file: Path, *args: str) -> Iterator[tuple[subprocess.Popen[str], int, str]]:
    """The model server's command line with ``args``, writing its port to
    ``port_file``: the process, its port and the first line it printed, once it
    listens. The process is killed (and reaped) on the way out."""
    process = subprocess.Popen(
        [*MODULE, *args, "--port-file", str(port_file)],
        stdout=subprocess.PIPE,
        text=True,
        env=module_env(),
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        yield process, int(port_file.read_text()), line
    finally:
        process.kill()
        process.wait()
        if process.stdout is not None:
            process.stdout.close()


def call(srv: ModelServer, path: str, payload: Any = None, method: str | None = None) -> Response:
    """One request with urllib; returns (status, headers, body) for errors too."""
    data = None if payload is None else json.dumps(payload).encode()
    request = urllib.request.Request(srv.base_url + path, data=data, method=method)
    request.add_header("content-type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, dict(response.headers.items()), response.read()
    except urllib.error.HTTPError as error:
        with error:
            return error.code, dict(error.headers.items()), error.read()


def sse(raw: bytes) -> list[tuple[str | None, Any]]:
    """Split an SSE body into (event or None, data) pairs; data is JSON or a raw string."""
    events: list[tuple[str | None, Any]] = []
    for frame in raw.decode().replace("\r\n", "\n").split("\n\n"):
        if not frame.strip():
            continue
        lines = dict(line.split(": ", 1) for line in frame.splitlines())
        data = lines["data"]
        events.append((lines.get("event"), data if data == "[DONE]" else json.loads(data)))
    return events


def raw_exchange(srv: ModelServer, path: str, payload: Any, until: bytes) -> bytes:
    """POST over a bare socket; read until ``until`` shows up after the headers."""
    data = json.dumps(payload).encode()
    head = f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Length: {len(data)}\r\n\r\n"
    with socket.create_connection((srv.host, srv.port), timeout=5) as sock:
        sock.sendall(head.encode() + data)
        received = b""
        while until not in received.partition(b"\r\n\r\n")[2]:
            chunk = sock.recv(65536)
            if not chunk:
                break
            received += chunk
        return received


def read_to_close(srv: ModelServer, path: str, payload: Any, timeout: float = 5) -> bytes:
    """Send a POST over a bare socket and read until the server closes the connection."""
    data = json.dumps(payload).encode()
    head = f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Length: {len(data)}\r\n\r\n"
    with socket.create_connection((srv.host, srv.port), timeout=timeout) as sock:
        sock.sendall(head.encode() + data)
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
        return received
