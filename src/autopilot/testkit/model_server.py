"""A scripted model server that lets the real agent CLIs run offline.

The server speaks the Anthropic Messages API (streaming SSE and plain JSON), so the
real Claude Code CLI can be pointed at it with ``ANTHROPIC_BASE_URL``. The wire
format was verified against Claude Code 2.1.197 (see
``shared/reference/offline-e2e.md``).

It keeps no state: every answer follows from the conversation in the request.

- **turn** is the 0-based index of the current real user prompt. Consecutive user
  messages count once; user messages carrying tool results, role ``system`` or
  ``developer`` messages, and user messages made only of ``<system-reminder>``
  blocks do not count.
- **step** is the number of tool results since that prompt.
- A request that offers no ``tools`` is a side call (e.g. a session title) and gets a
  short plain text answer.

Layers, so that other wire APIs can be added beside the Anthropic one::

    request body --Wire.conversation()--> Conversation
    Conversation --Script.decide()------> Action  (WriteFile | RunShell | Say | HttpError | Stall)
    Action ------Wire.reply()-----------> Reply   (text + the CLI's real tool call)
    Reply -------Wire.sse_events()/message()--> bytes on the socket

Run it as ``python -m autopilot.testkit.model_server --script default --port-file F``
or in-process with :class:`ModelServer`.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import posixpath
import re
import shlex
import signal
import sys
import tempfile
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import MappingProxyType, TracebackType
from typing import Any, Protocol
from urllib.parse import urlsplit

INPUT_TOKENS = 100
OUTPUT_TOKENS = 20
DEFAULT_MODEL = "claude-opus-4-8"

# ---------------------------------------------------------------------------
# Logical layer: conversation, actions, scripts (no wire format here).


@dataclass(frozen=True)
class Conversation:
    """What a script may look at, taken from one request.

    Attributes:
        turn: 0-based index of the current real user prompt.
        step: Number of tool results since that prompt.
        prompt: Text of the current prompt (reminder blocks left out).
        last_tool_result: Text of the latest tool result of this turn, or "".
        tool_names: Names of the tools the request offers; empty for a side call.
        cwd: The agent's working directory if the request states it, else None.
    """

    turn: int
    step: int
    prompt: str = ""
    last_tool_result: str = ""
    tool_names: tuple[str, ...] = ()
    cwd: str | None = None

    @property
    def is_side_call(self) -> bool:
        """True when the request offers no tools (title generation and the like)."""
        return not self.tool_names


@dataclass(frozen=True)
class WriteFile:
    """Create or overwrite ``path`` (relative to the agent's cwd) with ``content``."""

    path: str
    content: str


@dataclass(frozen=True)
class RunShell:
    """Run ``command`` with the agent's shell tool."""

    command: str


@dataclass(frozen=True)
class Say:
    """End the turn with ``text``."""

    text: str


@dataclass(frozen=True)
class HttpError:
    """Answer with an HTTP error; the wire renders its own error body and headers.

    Attributes:
        status: HTTP status, e.g. 401, 429, 500.
        message: The human-readable error message.
        retry_after_seconds: If set, rate-limit headers announce a reset this far away.
    """

    status: int
    message: str
    retry_after_seconds: int | None = None


@dataclass(frozen=True)
class Stall:
    """Start a streamed answer, then send nothing for ``seconds`` (idle-timeout tests)."""

    seconds: float = 3600.0


Action = WriteFile | RunShell | Say | HttpError | Stall


@dataclass(frozen=True)
class Rule:
    """One line of a script: when every given condition holds, answer ``action``.

    Attributes:
        action: What to answer.
        turn: Match only this turn; None matches any.
        step: Match only this step; None matches any.
        result_contains: Match only if the latest tool result contains this text.
        prompt_contains: Match only if the current prompt contains this text.
    """

    action: Action
    turn: int | None = None
    step: int | None = None
    result_contains: str | None = None
    prompt_contains: str | None = None

    def matches(self, conversation: Conversation) -> bool:
        """Return True if every condition of the rule holds for ``conversation``."""
        c = conversation
        return (
            (self.turn is None or self.turn == c.turn)
            and (self.step is None or self.step == c.step)
            and (self.result_contains is None or self.result_contains in c.last_tool_result)
            and (self.prompt_contains is None or self.prompt_contains in c.prompt)
        )


@dataclass(frozen=True)
class Script:
    """A named list of rules; the first rule that matches decides the answer.

    Attributes:
        name: The name used with ``--script``.
        rules: Tried in order.
        side_text: The answer to side calls (requests without tools).
    """

    name: str
    rules: tuple[Rule, ...]
    side_text: str = "Scripted session"

    def decide(self, conversation: Conversation) -> Action:
        """Return the action for ``conversation``; a plain text if no rule matches."""
        if conversation.is_side_call:
            return Say(self.side_text)
        for rule in self.rules:
            if rule.matches(conversation):
                return rule.action
        return Say(
            f"script {self.name!r} has nothing for turn {conversation.turn} "
            f"step {conversation.step}."
        )


HELLO = WriteFile("hello.txt", "hello from the fake model\n")
APPEND = RunShell("echo second-turn >> hello.txt && cat hello.txt")
CHECK = RunShell("cat hello.txt 2>/dev/null || echo MISSING")


def _always(action: Action) -> tuple[Rule, ...]:
    return (Rule(action),)


SCRIPTS: Mapping[str, Script] = MappingProxyType(
    {
        s.name: s
        for s in (
            Script(
                "default",
                (
                    Rule(HELLO, turn=0, step=0),
                    Rule(Say("done. COMPLETE"), turn=0, step=1),
                    Rule(APPEND, turn=1, step=0),
                    Rule(Say("second turn done. COMPLETE"), turn=1, step=1),
                ),
            ),
            Script(
                "check-then-write",
                (
                    Rule(CHECK, step=0),
                    Rule(HELLO, step=1, result_contains="MISSING"),
                    Rule(Say("hello.txt is in place. <promise>COMPLETE</promise>"), step=1),
                    Rule(Say("wrote hello.txt; will verify next iteration."), step=2),
                ),
            ),
            Script(
                "continue",
                (
                    Rule(HELLO, turn=0, step=0),
                    Rule(Say("wrote hello.txt; not finished yet."), turn=0, step=1),
                    Rule(APPEND, turn=1, step=0),
                    Rule(Say("second turn done. COMPLETE"), turn=1, step=1),
                ),
            ),
            Script("auth-401", _always(HttpError(401, "invalid x-api-key"))),
            Script(
                "rate-429",
                _always(
                    HttpError(
                        429,
                        "This request would exceed the rate limit for your organization "
                        "of 50 requests per minute. Please try again later.",
                        retry_after_seconds=1,
                    )
                ),
            ),
            Script("server-500", _always(HttpError(500, "Internal server error"))),
            Script("stall", _always(Stall())),
        )
    }
)
"""The built-in scripts by name."""


def get_script(name: str) -> Script:
    """Return the built-in script called ``name``.

    Raises:
        KeyError: No such script; the message lists the known names.
    """
    try:
        return SCRIPTS[name]
    except KeyError:
        raise KeyError(f"unknown script {name!r}; known: {', '.join(SCRIPTS)}") from None


def narration(action: WriteFile | RunShell) -> str:
    """The short text a model says before a tool call, as real models do."""
    if isinstance(action, WriteFile):
        return f"I'll write {action.path}."
    return f"I'll run `{action.command}`."


# ---------------------------------------------------------------------------
# Wire layer: the Anthropic Messages API as Claude Code 2.1.197 uses it.


@dataclass(frozen=True)
class ToolCall:
    """A call of one of the CLI's real tools: ``name`` with JSON ``arguments``."""

    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class Reply:
    """A model answer: ``text`` (may be empty), then at most one tool call."""

    text: str
    tool: ToolCall | None = None


class Wire(Protocol):
    """A wire API over the same scripts (Anthropic now; OpenAI or Gemini later).

    ``seed`` is :func:`request_seed` of the body; wires build their ids from it.
    """

    def conversation(self, body: Mapping[str, Any]) -> Conversation:
        """Read turn, step and context from a request body."""
        ...

    def reply(self, action: WriteFile | RunShell | Say, conversation: Conversation) -> Reply:
        """Map a logical action to text plus the CLI's real tool call."""
        ...

    def sse_events(self, reply: Reply, model: str, seed: str) -> Iterator[bytes]:
        """The whole streamed answer, one SSE frame per item."""
        ...

    def message(self, reply: Reply, model: str, seed: str) -> dict[str, Any]:
        """The non-streamed answer as a JSON object."""
        ...

    def stall_prefix(self, model: str, seed: str) -> bytes:
        """What a stalled answer sends before going quiet."""
        ...

    def error(self, error: HttpError, seed: str) -> tuple[dict[str, Any], list[tuple[str, str]]]:
        """The JSON body and extra headers of an HTTP error answer."""
        ...


_REMINDER = re.compile(r"^\s*(<system-reminder>.*?</system-reminder>\s*)*$", re.DOTALL)
_CWD = re.compile(r"Primary working directory:\s*(\S[^\n]*)")


def _texts(content: Any) -> list[str]:
    """Text pieces of an Anthropic ``content`` (a str or a list of blocks)."""
    if isinstance(content, str):
        return [content]
    if isinstance(content, list):
        return [
            b["text"]
            for b in content
            if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)
        ]
    return []


class AnthropicWire:
    """Anthropic Messages API: ``POST /v1/messages`` bodies and answers.

    Tools used (Claude Code 2.1.197): ``Write {file_path (absolute), content}`` and
    ``Bash {command, description}``; a missing Write falls back to Bash.
    """

    def conversation(self, body: Mapping[str, Any]) -> Conversation:
        """Read a Messages request body ``{system, messages, tools, ...}``."""
        prompts, step, prompt, result, in_prompt = 0, 0, "", "", False
        for message in body.get("messages") or []:
            if not isinstance(message, dict) or message.get("role") in ("system", "developer"):
                continue
            content = message.get("content")
            results = [
                b
                for b in (content if isinstance(content, list) else [])
                if isinstance(b, dict) and b.get("type") == "tool_result"
            ]
            if message.get("role") != "user":
                in_prompt = False
            elif results:
                step += len(results)
                result = "\n".join(_texts(results[-1].get("content")))
                in_prompt = False
            else:
                text = "\n".join(t for t in _texts(content) if not _REMINDER.match(t))
                if not text:
                    continue
                if not in_prompt:
                    prompts, step, result, prompt = prompts + 1, 0, "", ""
                prompt = f"{prompt}\n{text}" if prompt else text
                in_prompt = True
        tools = tuple(
            str(t["name"])
            for t in body.get("tools") or []
            if isinstance(t, dict) and isinstance(t.get("name"), str)
        )
        return Conversation(max(prompts - 1, 0), step, prompt, result, tools, _find_cwd(body))

    def reply(self, action: WriteFile | RunShell | Say, conversation: Conversation) -> Reply:
        """Map ``action`` to Claude's ``Write`` / ``Bash`` tools offered in the request."""
        if isinstance(action, Say):
            return Reply(action.text)
        tools = {name.lower(): name for name in conversation.tool_names}
        if isinstance(action, WriteFile) and "write" in tools:
            path = action.path
            if conversation.cwd and not posixpath.isabs(path):
                path = posixpath.join(conversation.cwd, path)
            args = {"file_path": path, "content": action.content}
            return Reply(narration(action), ToolCall(tools["write"], args))
        command = action.command if isinstance(action, RunShell) else _write_command(action)
        if "bash" in tools:
            args = {"command": command, "description": f"Run {command[:60]}"}
            return Reply(narration(action), ToolCall(tools["bash"], args))
        return Reply(f"(no tool offered for: {narration(action)})")

    def message(self, reply: Reply, model: str, seed: str) -> dict[str, Any]:
        """The non-streamed answer, as Claude Code 2.1.197 accepts it.

        Returns:
            ``{"id": "msg_..", "type": "message", "role": "assistant", "model", "content":
            [text block?, tool_use block?], "stop_reason": "tool_use"|"end_turn",
            "stop_sequence": None, "usage": {input_tokens: 100, output_tokens: 20, ...}}``.
        """
        content: list[dict[str, Any]] = []
        if reply.text:
            content.append({"type": "text", "text": reply.text})
        if reply.tool:
            content.append(_tool_block(reply.tool, seed, reply.tool.arguments))
        return {
            **_message_head(model, seed),
            "content": content,
            "stop_reason": "tool_use" if reply.tool else "end_turn",
            "usage": _usage(OUTPUT_TOKENS),
        }

    def sse_events(self, reply: Reply, model: str, seed: str) -> Iterator[bytes]:
        """The streamed answer as SSE frames, in the order Claude Code 2.1.197 accepts.

        Yields:
            ``b"event: NAME\ndata: JSON\n\n"`` frames: message_start, ping, then a text
            block (content_block_start/delta/stop) if there is text, then a tool_use
            block whose input arrives as input_json_delta pieces, then message_delta
            (stop_reason tool_use or end_turn, output_tokens 20) and message_stop.
        """
        yield self.stall_prefix(model, seed)
        yield _sse("ping", {"type": "ping"})
        index = 0
        if reply.text:
            yield _block_start(index, {"type": "text", "text": ""})
            yield _block_delta(index, {"type": "text_delta", "text": reply.text})
            yield _sse("content_block_stop", {"type": "content_block_stop", "index": index})
            index += 1
        if reply.tool:
            arguments = json.dumps(reply.tool.arguments)
            half = len(arguments) // 2
            yield _block_start(index, _tool_block(reply.tool, seed, {}))
            for part in ("", arguments[:half], arguments[half:]):
                yield _block_delta(index, {"type": "input_json_delta", "partial_json": part})
            yield _sse("content_block_stop", {"type": "content_block_stop", "index": index})
        stop = "tool_use" if reply.tool else "end_turn"
        yield _sse(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": OUTPUT_TOKENS},
            },
        )
        yield _sse("message_stop", {"type": "message_stop"})

    def stall_prefix(self, model: str, seed: str) -> bytes:
        """The ``message_start`` frame, which also opens every streamed answer."""
        message = {**_message_head(model, seed), "content": [], "stop_reason": None}
        return _sse(
            "message_start", {"type": "message_start", "message": {**message, "usage": _usage(1)}}
        )

    def error(self, error: HttpError, seed: str) -> tuple[dict[str, Any], list[tuple[str, str]]]:
        """The error body ``{"type":"error","error":{type, message},"request_id"}`` and headers."""
        kind = _ERROR_TYPES.get(error.status, "api_error")
        body = {
            "type": "error",
            "error": {"type": kind, "message": error.message},
            "request_id": f"req_{seed}",
        }
        headers = [("request-id", f"req_{seed}")]
        if error.retry_after_seconds is not None:
            reset = datetime.now(UTC).replace(microsecond=0)
            stamp = (reset + timedelta(seconds=error.retry_after_seconds)).isoformat()
            stamp = stamp.replace("+00:00", "Z")
            headers.append(("retry-after", str(error.retry_after_seconds)))
            for family in ("requests", "tokens", "input-tokens", "output-tokens"):
                prefix = f"anthropic-ratelimit-{family}"
                headers += [(f"{prefix}-limit", "50"), (f"{prefix}-remaining", "0")]
                headers.append((f"{prefix}-reset", stamp))
        return body, headers


_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}


def _find_cwd(body: Mapping[str, Any]) -> str | None:
    """The cwd Claude states in its system prompt ("Primary working directory: /x")."""
    texts = _texts(body.get("system"))
    for message in body.get("messages") or []:
        if isinstance(message, dict):
            texts += _texts(message.get("content"))
    for text in texts:
        if found := _CWD.search(text):
            return found.group(1).strip().strip("`")
    return None


def _write_command(action: WriteFile) -> str:
    return f"printf '%s' {shlex.quote(action.content)} > {shlex.quote(action.path)}"


def _usage(output_tokens: int) -> dict[str, int]:
    return {
        "input_tokens": INPUT_TOKENS,
        "output_tokens": output_tokens,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
    }


def _message_head(model: str, seed: str) -> dict[str, Any]:
    return {
        "id": f"msg_{seed}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "stop_sequence": None,
    }


def _tool_block(tool: ToolCall, seed: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"type": "tool_use", "id": f"toolu_{seed}", "name": tool.name, "input": arguments}


def _sse(event: str, data: Mapping[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


def _block_start(index: int, block: Mapping[str, Any]) -> bytes:
    return _sse(
        "content_block_start",
        {"type": "content_block_start", "index": index, "content_block": block},
    )


def _block_delta(index: int, delta: Mapping[str, Any]) -> bytes:
    return _sse(
        "content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}
    )


def request_seed(body: Mapping[str, Any]) -> str:
    """A stable id part derived from the body, so equal requests get equal answers."""
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:24]


# ---------------------------------------------------------------------------
# HTTP shell.


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

    def __init__(self, address: tuple[str, int], script: Script, log: bool) -> None:
        super().__init__(address, _Handler)
        self.script = script
        self.wire: Wire = AnthropicWire()
        self.log = log
        self.stopping = threading.Event()
        self.lock = threading.Lock()
        self.recorded: list[RecordedRequest] = []


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
        if urlsplit(self.path).path.rstrip("/") == "/v1/models":
            self._json(200, _models())
        else:
            self._not_found()

    def do_POST(self) -> None:
        raw = self._read_body()
        try:
            body = json.loads(raw) if raw else {}
        except ValueError:
            body = None
        self._record(body)
        path = urlsplit(self.path).path.rstrip("/")
        if path not in ("/v1/messages", "/v1/messages/count_tokens"):
            self._not_found()
        elif not isinstance(body, dict):
            self._error(HttpError(400, "request body is not a JSON object"), "bad")
        elif path.endswith("count_tokens"):
            self._json(200, {"input_tokens": INPUT_TOKENS})
        else:
            self._messages(body)

    def do_PUT(self) -> None:
        self._read_body()
        self._record(None)
        self._not_found()

    do_DELETE = do_PATCH = do_PUT  # noqa: N815 - stdlib naming

    def _messages(self, body: dict[str, Any]) -> None:
        wire = self.server.wire
        conversation = wire.conversation(body)
        action = self.server.script.decide(conversation)
        seed, model = request_seed(body), str(body.get("model") or DEFAULT_MODEL)
        if isinstance(action, HttpError):
            self._error(action, seed)
        elif isinstance(action, Stall):
            self._stream([wire.stall_prefix(model, seed)], stall_seconds=action.seconds)
        elif body.get("stream"):
            self._stream(wire.sse_events(wire.reply(action, conversation), model, seed))
        else:
            self._json(200, wire.message(wire.reply(action, conversation), model, seed))

    def _stream(self, frames: Iterator[bytes] | list[bytes], stall_seconds: float = 0) -> None:
        self.close_connection = True
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        try:
            for frame in frames:
                self.wfile.write(frame)
                self.wfile.flush()
            if stall_seconds:
                self.server.stopping.wait(stall_seconds)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up; nothing left to tell it

    def _error(self, error: HttpError, seed: str) -> None:
        body, headers = self.server.wire.error(error, seed)
        self._json(error.status, body, headers)

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


def _models() -> dict[str, Any]:
    model = {
        "type": "model",
        "id": DEFAULT_MODEL,
        "display_name": "Scripted fake model",
        "created_at": "2025-01-01T00:00:00Z",
    }
    return {"data": [model], "has_more": False, "first_id": DEFAULT_MODEL, "last_id": DEFAULT_MODEL}


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
    ) -> None:
        self.script = get_script(script) if isinstance(script, str) else script
        self._address = (host, port)
        self._log = log
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Bind and serve in a daemon thread.

        Raises:
            OSError: The address could not be bound.
        """
        self._server = _Server(self._address, self.script, self._log)
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

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
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
        """``http://HOST:PORT``, the value for ``ANTHROPIC_BASE_URL``."""
        return f"http://{self.host}:{self.port}"

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
        description="Serve a scripted Anthropic Messages API on 127.0.0.1.",
    )
    parser.add_argument("--script", default="default", choices=sorted(SCRIPTS))
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--port-file", help="write the chosen port here")
    parser.add_argument("--log", action="store_true", help="log requests to stderr")
    args = parser.parse_args(argv)
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    with ModelServer(args.script, host=args.host, port=args.port, log=args.log) as server:
        if args.port_file:
            write_port_file(args.port_file, server.port)
        print(f"listening on {server.base_url}", flush=True)
        while not stop.wait(0.5):
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
