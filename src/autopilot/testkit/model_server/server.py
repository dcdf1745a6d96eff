"""The HTTP shell: routes a request to a wire, applies the script, writes the bytes.

See :mod:`.routes` for the paths. Streamed answers go out with ``Connection: close``
and end when the socket closes (or, when a script cuts them, as chunked bodies that
never finish); other answers are JSON with ``Content-Length``. Unknown paths get a
404 JSON, bodies that are not JSON objects a 400 in the wire's error format.
"""

from __future__ import annotations

import json
import socket
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from autopilot.testkit.model_server.library import get_script
from autopilot.testkit.model_server.routes import Route, get_answer, post_route
from autopilot.testkit.model_server.scripts import (
    Delivery,
    ErrorKind,
    HttpError,
    Script,
    decide,
    delivery,
)
from autopilot.testkit.model_server.tools import reply
from autopilot.testkit.model_server.wire import INPUT_TOKENS, ErrorAnswer, Request, request_seed


@dataclass(frozen=True)
class RecordedRequest:
    """One request the server answered.

    Attributes:
        method: "GET", "POST", "HEAD", ...
        path: The request target with its query, e.g. "/v1/messages?beta=true".
        body: The parsed JSON body, or None if there was none or it was not JSON.
        headers: Request headers, names lower-cased.
    """

    method: str
    path: str
    body: Any
    headers: dict[str, str] = field(default_factory=dict)


class _Server(ThreadingHTTPServer):
    daemon_threads = True  # a stalled answer must never hold up shutdown

    def __init__(
        self,
        address: tuple[str, int],
        script: Script,
        fail_until_ms: int | None,
        log: bool,
        fail_window_ms: int | None = None,
    ) -> None:
        super().__init__(address, _Handler)
        self.script = script
        self.fail_until_ms = fail_until_ms
        self.fail_window_ms = fail_window_ms
        self.log = log
        self.stopping = threading.Event()
        self.lock = threading.Lock()
        self.recorded: list[RecordedRequest] = []

    def window_end_ms(self, conversation_is_side_call: bool, now_ms: int) -> int | None:
        """End of the 429 window; a window of ``fail_window_ms`` opens at the first
        tools-bearing request, so a slow-starting client still meets it."""
        with self.lock:
            if (
                self.fail_until_ms is None
                and self.fail_window_ms is not None
                and not conversation_is_side_call
            ):
                self.fail_until_ms = now_ms + self.fail_window_ms
            return self.fail_until_ms

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Stay quiet when a client drops its connection; report anything else."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        if self.server.log:
            sys.stderr.write(f"model_server: {format % args}\n")

    def do_HEAD(self) -> None:
        self._record(None)
        if urlsplit(self.path).path == "/":
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()
        else:
            self._not_found()

    def do_GET(self) -> None:
        self._record(None)
        answer = get_answer(urlsplit(self.path).path.rstrip("/"))
        if answer is None:
            self._not_found()
        else:
            self._json(200, answer)

    def do_POST(self) -> None:
        raw = self._read_body()
        try:
            body = json.loads(raw) if raw else {}
        except ValueError:
            body = None
        self._record(body)
        route = post_route(urlsplit(self.path).path.rstrip("/"))
        if route is None:
            self._not_found()
        elif not isinstance(body, dict):
            request = Request({}, route.model or route.default_model, "bad", False)
            self._error(route.wire.error(HttpError(ErrorKind.BAD_REQUEST), request, _now_ms()))
        elif route.count_tokens:
            key = "totalTokens" if route.model else "input_tokens"
            self._json(200, {key: INPUT_TOKENS})
        else:
            self._generate(route, body)

    def do_PUT(self) -> None:
        self._read_body()
        self._record(None)
        self._not_found()

    do_DELETE = do_PATCH = do_PUT  # noqa: N815 - stdlib naming

    def _generate(self, route: Route, body: dict[str, Any]) -> None:
        conversation = route.wire.conversation(body)
        now_ms = _now_ms()
        fail_until = self.server.window_end_ms(conversation.is_side_call, now_ms)
        action = decide(self.server.script, conversation, now_ms, fail_until)
        model = route.model or str(body.get("model") or route.default_model)
        stream = bool(body.get("stream")) if route.stream is None else route.stream
        request = Request(body, model, request_seed(body), stream)
        if isinstance(action, HttpError):
            self._error(route.wire.error(action, request, now_ms))
            return
        content, how = delivery(action)
        answer = reply(content, conversation)
        if stream:
            self._send(route.wire.stream(answer, request), None, how)
        else:
            data = json.dumps(route.wire.message(answer, request)).encode()
            middle = len(data) // 2
            if how.cut_after is not None:
                how = replace(how, cut_after=1)  # half the body, then the socket closes
            self._send([data[:middle], data[middle:]], len(data), how)

    def _send(self, frames: Sequence[bytes], length: int | None, how: Delivery) -> None:
        """Write an answer's ``frames`` as ``how`` says.

        ``length`` None means a stream (SSE, ended by closing the socket, or chunked
        when it is cut); otherwise a JSON body of that many bytes, split in two frames.
        A stall sends the first frame of a stream (nothing of a JSON body).
        """
        delay, cut, stall = how.delay_seconds, how.cut_after, how.stall_seconds
        chunked = length is None and cut is not None
        self.close_connection = True
        self.send_response(200)
        if length is None:
            self.send_header("Content-Type", "text/event-stream; charset=utf-8")
            self.send_header("Cache-Control", "no-cache")
        else:
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(length))
        if chunked:
            self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Connection", "close")
        self.end_headers()
        if stall is not None:
            frames = frames[: 1 if length is None else 0]
        elif cut is not None:
            frames = frames[: min(cut, len(frames) - 1)]  # never the final frame
        try:
            for frame in frames:
                if delay and self.server.stopping.wait(delay):
                    return
                self.wfile.write(b"%x\r\n%s\r\n" % (len(frame), frame) if chunked else frame)
                self.wfile.flush()
            if stall is not None:
                self.server.stopping.wait(stall)
            elif cut is not None:
                self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass  # the client gave up; nothing left to tell it

    def _error(self, answer: ErrorAnswer) -> None:
        self._json(answer.status, answer.body, answer.headers)

    def _not_found(self) -> None:
        message = f"no route for {self.command} {urlsplit(self.path).path}"
        self._json(404, {"type": "error", "error": {"type": "not_found_error", "message": message}})

    def _json(self, status: int, body: Any, headers: Sequence[tuple[str, str]] = ()) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in headers:
            self.send_header(name, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _read_body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            while size := int(self.rfile.readline().split(b";")[0].strip() or b"0", 16):
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
            while self.rfile.readline().strip():
                pass  # trailers
            return b"".join(chunks)
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _record(self, body: Any) -> None:
        headers = {k.lower(): v for k, v in self.headers.items()}
        with self.server.lock:
            self.server.recorded.append(RecordedRequest(self.command, self.path, body, headers))


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class ModelServer:
    """The scripted server in a background thread, for tests.

    Example::

        with ModelServer(script="default") as srv:
            env["ANTHROPIC_BASE_URL"] = srv.base_url
            ...
            assert srv.requests[0].path.startswith("/v1/messages")

    Args:
        script: A built-in script name or a :class:`Script`.
        host: Address to bind.
        port: Port to bind; 0 lets the OS choose a free one.
        log: Log each request to stderr.
        fail_until_epoch_ms: Answer every tools-bearing request with a 429 that
            announces this instant (epoch ms) as its reset, until it passes; then
            follow the script.
        fail_for_seconds: Instead of an instant, a window of this many seconds that
            opens at the first tools-bearing request (so a client that is slow to start
            still meets it). With neither, the script's ``fail_for_seconds`` is used
            the same way, if it has one.

    Raises:
        KeyError: ``script`` names no built-in script.
    """

    def __init__(
        self,
        script: str | Script = "default",
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        log: bool = False,
        fail_until_epoch_ms: int | None = None,
        fail_for_seconds: float | None = None,
    ) -> None:
        self.script = get_script(script) if isinstance(script, str) else script
        self._address = (host, port)
        self._log = log
        self._fail_until_ms = fail_until_epoch_ms
        self._fail_for_seconds = fail_for_seconds
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Bind and serve in a daemon thread.

        Raises:
            OSError: The address could not be bound.
        """
        window_seconds = self._fail_for_seconds
        if window_seconds is None and self._fail_until_ms is None:
            window_seconds = self.script.fail_for_seconds
        window_ms = None if window_seconds is None else round(window_seconds * 1000)
        self._server = _Server(
            self._address, self.script, self._fail_until_ms, self._log, window_ms
        )
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},  # shutdown() waits up to one poll
            name="model-server",
            daemon=True,
        )
        self._thread.start()

    def stop(self) -> None:
        """Stop serving, end stalled answers and close the socket. Safe to call twice."""
        server, self._server = self._server, None
        if server is None:
            return
        server.stopping.set()
        server.shutdown()
        server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> ModelServer:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        """The bound port.

        Raises:
            RuntimeError: The server is not running.
        """
        return int(self._running().server_address[1])

    @property
    def host(self) -> str:
        """The bound address, e.g. "127.0.0.1"."""
        return str(self._running().server_address[0])

    @property
    def base_url(self) -> str:
        """``http://HOST:PORT``: ``ANTHROPIC_BASE_URL``; OpenAI clients append ``/v1``."""
        return f"http://{self.host}:{self.port}"

    @property
    def fail_until_epoch_ms(self) -> int | None:
        """End of the 429 window in epoch ms, or None if there is none."""
        return self._running().fail_until_ms

    @property
    def requests(self) -> list[RecordedRequest]:
        """A copy of the requests served so far, oldest first."""
        server = self._running()
        with server.lock:
            return list(server.recorded)

    def _running(self) -> _Server:
        if self._server is None:
            raise RuntimeError("model server is not running")
        return self._server
