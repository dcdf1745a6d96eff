"""Failure scripts as each wire renders them: errors, reset fields, slow, stalled and
dropped streams, and the stateless recovery window."""

from __future__ import annotations

import json
import math
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from autopilot.testkit.model_server import (
    Conversation,
    Drop,
    ErrorKind,
    HttpError,
    ModelServer,
    Rule,
    Say,
    Script,
    Slow,
    Stall,
    ToolSpec,
    decide,
    get_script,
)
from autopilot.testkit.model_server.scripts import STALL_TEXT, Delivery, delivery
from tests.testkit import test_chat_wire as chat
from tests.testkit import test_gemini_wire as gemini
from tests.testkit import test_model_server as anthropic
from tests.testkit import test_responses_wire as responses
from tests.testkit.client import MODULE, call, module_env, raw_exchange, read_to_close, served, sse
from tests.testkit.conftest import scripted


@dataclass(frozen=True)
class Api:
    """A turn-0 request on one wire, and where its final frame is recognised."""

    name: str
    path: str
    body: dict[str, Any]
    is_final: Callable[[Any], bool]


APIS = {
    "anthropic": Api(
        "anthropic",
        "/v1/messages?beta=true",
        anthropic.body(*anthropic.TURN0),
        lambda data: data.get("type") == "message_stop",
    ),
    "responses": Api(
        "responses",
        "/v1/responses",
        responses.body(responses.TURN0),
        lambda data: data.get("type") == "response.completed",
    ),
    "chat": Api(
        "chat",
        "/v1/chat/completions",
        chat.body(chat.PI, chat.turns(chat.PI)["turn0"]),
        lambda data: data == "[DONE]",
    ),
    "gemini": Api(
        "gemini",
        gemini.STREAM,
        gemini.body(gemini.TURN0),
        lambda data: "finishReason" in data["candidates"][0],
    ),
}
ALL = pytest.mark.parametrize("api", list(APIS.values()), ids=list(APIS))
OPENAI = ("responses", "chat")
RATE_HEADERS = ("retry-after", "retry-after-ms", "x-ratelimit-reset-requests")


def post(srv: ModelServer, api: Api) -> tuple[int, dict[str, str], Any]:
    status, headers, raw = call(srv, api.path, api.body)
    return status, {k.lower(): v for k, v in headers.items()}, json.loads(raw)


# --- HTTP errors -----------------------------------------------------------------------


@scripted("auth-401")
@ALL
def test_auth_401_in_each_apis_own_shape(server: ModelServer, api: Api) -> None:
    status, headers, body = post(server, api)
    assert (status, headers["content-type"]) == (401, "application/json")
    error = body["error"]
    if api.name == "anthropic":
        assert (body["type"], error["type"]) == ("error", "authentication_error")
    elif api.name == "gemini":
        assert (error["code"], error["status"]) == (401, "UNAUTHENTICATED")
    else:
        assert (error["type"], error["code"]) == ("invalid_request_error", "invalid_api_key")
    assert error["message"]
    assert not any(name in headers for name in RATE_HEADERS)


@scripted("server-500")
@ALL
def test_server_500_in_each_apis_own_shape(server: ModelServer, api: Api) -> None:
    status, _, body = post(server, api)
    error = body["error"]
    assert status == 500
    expected = {"anthropic": "api_error", "gemini": "INTERNAL"}.get(api.name, "server_error")
    assert (error.get("status") or error["type"]) == expected


@scripted("rate-429")
@ALL
def test_rate_429_announces_a_reset_one_second_away(server: ModelServer, api: Api) -> None:
    before_s = time.time()
    status, headers, body = post(server, api)
    assert status == 429
    error = body["error"]
    if api.name == "anthropic":
        assert error["type"] == "rate_limit_error"
        assert headers["retry-after"] == "1"
        for family in ("requests", "tokens", "input-tokens", "output-tokens"):
            assert headers[f"anthropic-ratelimit-{family}-remaining"] == "0"
            reset = datetime.fromisoformat(headers[f"anthropic-ratelimit-{family}-reset"])
            assert before_s - 1 <= reset.timestamp() <= time.time() + 2
    elif api.name == "gemini":
        assert (error["code"], error["status"]) == (429, "RESOURCE_EXHAUSTED")
        quota, retry = error["details"]
        assert quota["@type"] == "type.googleapis.com/google.rpc.QuotaFailure"
        assert quota["violations"][0]["quotaId"].startswith("GenerateRequestsPerMinute")
        assert retry == {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "1s"}
    else:
        assert (error["type"], error["code"]) == ("requests", "rate_limit_exceeded")
        assert error["message"].endswith("Please try again in 1s.")
        assert (headers["retry-after"], headers["retry-after-ms"]) == ("1", "1000")
        for family in ("requests", "tokens"):
            assert headers[f"x-ratelimit-remaining-{family}"] == "0"
            assert headers[f"x-ratelimit-reset-{family}"] == "1s"


@scripted("rate-429-no-reset")
@ALL
def test_rate_429_without_any_reset_field(server: ModelServer, api: Api) -> None:
    status, headers, body = post(server, api)
    assert status == 429
    assert not [name for name in headers if "reset" in name or name.startswith("retry-after")]
    assert "details" not in body["error"]
    assert "try again in" not in body["error"]["message"].lower()
    assert "retry in" not in body["error"]["message"].lower()


@scripted("usage-limit-429")
@ALL
def test_usage_limit_429_names_a_reset_an_hour_away(server: ModelServer, api: Api) -> None:
    before_s = time.time()
    status, headers, body = post(server, api)
    after_s = time.time()
    assert status == 429
    error = body["error"]
    if api.name in OPENAI:
        assert error["type"] == "usage_limit_reached"
        assert error["resets_in_seconds"] == 3600
        assert math.floor(before_s) + 3600 <= error["resets_at"] <= math.ceil(after_s) + 3600
        assert not any(name in headers for name in RATE_HEADERS)
    elif api.name == "anthropic":
        assert headers["anthropic-ratelimit-unified-status"] == "rejected"
        reset = int(headers["anthropic-ratelimit-unified-reset"])
        assert math.floor(before_s) + 3600 <= reset <= math.ceil(after_s) + 3600
        assert headers["retry-after"] == "3600"
    else:
        quota, retry = error["details"]
        assert quota["violations"][0]["quotaId"].startswith("GenerateRequestsPerDay")
        assert retry["retryDelay"] == "3600s"


@pytest.mark.parametrize("server", ["auth-401", "rate-429", "usage-limit-429"], indirect=True)
def test_error_scripts_still_answer_side_calls(server: ModelServer) -> None:
    status, _, raw = call(server, "/v1/responses", responses.body(responses.TURN0, tools=[]))
    assert status == 200
    assert b"Scripted session" in raw


# --- streams: slow, stalled, dropped ---------------------------------------------------


def test_delivery_unwraps_stream_behaviours() -> None:
    assert delivery(Say("x")) == (Say("x"), Delivery())
    assert delivery(Slow(Say("x"), 0.5)) == (Say("x"), Delivery(delay_seconds=0.5))
    assert delivery(Drop(Say("x"), 3)) == (Say("x"), Delivery(cut_after=3))
    assert delivery(Stall(7)) == (Say(STALL_TEXT), Delivery(stall_seconds=7))


@ALL
def test_slow_stream_sends_the_same_bytes_with_pauses(api: Api) -> None:
    slow = Script("slow", (Rule(Slow(Say("ok"), delay_seconds=0.3)),))
    with (
        ModelServer(slow) as srv,
        ModelServer(Script("fast", (Rule(Say("ok")),))) as fast,
    ):
        expected = call(fast, api.path, api.body)[2]
        with socket.create_connection((srv.host, srv.port), timeout=5) as sock:
            data = json.dumps(api.body).encode()
            head = f"POST {api.path} HTTP/1.1\r\nHost: x\r\nContent-Length: {len(data)}\r\n\r\n"
            sock.sendall(head.encode() + data)
            received = b""
            while b"\r\n\r\n" not in received or not received.split(b"\r\n\r\n", 1)[1]:
                received += sock.recv(65536)
            sock.settimeout(0.1)
            with pytest.raises(TimeoutError):
                sock.recv(65536)  # the next frame is still 0.3 s away
            sock.settimeout(10)
            while chunk := sock.recv(65536):
                received += chunk
    assert received.split(b"\r\n\r\n", 1)[1] == expected


def test_the_slow_stream_script_wraps_every_default_answer() -> None:
    actions = [rule.action for rule in get_script("slow-stream").rules]
    assert [a.action for a in actions if isinstance(a, Slow)] == [
        r.action for r in get_script("default").rules
    ]


@ALL
def test_stall_sends_headers_and_the_first_event_then_nothing(api: Api) -> None:
    srv = ModelServer("stall")
    srv.start()
    try:
        end = b"\r\n\r\n" if api.name == "gemini" else b"\n\n"
        received = raw_exchange(srv, api.path, api.body, until=end)
        head, _, first = received.partition(b"\r\n\r\n")
        assert b"200 OK" in head
        events = sse(first)
        assert len(events) == 1
        assert not api.is_final(events[0][1])
        with socket.create_connection((srv.host, srv.port), timeout=5):
            pass  # the server still accepts while one answer hangs
    finally:
        started = time.monotonic()
        srv.stop()
    assert time.monotonic() - started < 5


def dechunk(body: bytes) -> tuple[bytes, bool]:
    """Decode a chunked body; also say whether it ended with the final empty chunk."""
    out = b""
    while body:
        size_line, _, rest = body.partition(b"\r\n")
        size = int(size_line, 16)
        if size == 0:
            return out, True
        out, body = out + rest[:size], rest[size + 2 :]
    return out, False


@scripted("drop-stream")
@ALL
def test_drop_stream_cuts_a_chunked_body_before_its_final_event(
    server: ModelServer, api: Api
) -> None:
    head, _, body = read_to_close(server, api.path, api.body).partition(b"\r\n\r\n")
    assert b"Transfer-Encoding: chunked" in head
    data, finished = dechunk(body)
    assert not finished
    events = sse(data)
    assert 1 <= len(events) <= 2
    assert not any(api.is_final(payload) for _, payload in events)


@scripted("drop-stream")
def test_drop_of_a_json_answer_sends_less_than_its_content_length(server: ModelServer) -> None:
    payload = {**anthropic.body(*anthropic.TURN0), "stream": False}
    head, _, body = read_to_close(server, "/v1/messages", payload).partition(b"\r\n\r\n")
    length = int(head.split(b"Content-Length: ")[1].split(b"\r\n")[0])
    assert 0 < len(body) < length


# --- the recovery window ---------------------------------------------------------------

TOOLS = (ToolSpec("bash"),)


def test_decide_fails_until_the_window_ends_then_follows_the_script() -> None:
    script = get_script("default")
    turn0 = Conversation(0, 0, "make hello.txt", tools=TOOLS)
    assert decide(script, turn0, now_ms=1_000, fail_until_ms=4_500) == HttpError(
        ErrorKind.RATE_LIMIT, retry_after_seconds=3.5
    )
    assert decide(script, turn0, now_ms=4_500, fail_until_ms=4_500) == script.decide(turn0)
    assert decide(script, turn0, now_ms=1_000) == script.decide(turn0)
    side = Conversation(0, 0, "title")
    assert decide(script, side, now_ms=1_000, fail_until_ms=4_500) == Say("Scripted session")


def test_the_window_429_names_exactly_the_end_of_the_window() -> None:
    error = HttpError(ErrorKind.RATE_LIMIT, retry_after_seconds=(4_500 - 1_000) / 1000)
    assert error.resets_at_ms(now_ms=1_000) == 4_500


def test_recover_429_opens_its_window_at_the_first_model_request() -> None:
    with ModelServer("recover-429") as srv:
        assert srv.fail_until_epoch_ms is None  # nothing asked yet: no window
        time.sleep(1.2)  # a client that is slow to start still meets the whole window
        asked_ms = time.time() * 1000
        status, headers, _ = post(srv, APIS["chat"])
        fail_until = srv.fail_until_epoch_ms
        assert fail_until is not None
        assert 9_000 <= fail_until - asked_ms <= 10_500
        status_again, headers_again, _ = post(srv, APIS["chat"])
        assert srv.fail_until_epoch_ms == fail_until  # the window opens once
    assert status == 429
    assert status_again == 429
    assert 9 <= int(headers["retry-after"]) <= 10
    assert int(headers_again["retry-after"]) <= int(headers["retry-after"])


@ALL
def test_a_server_window_answers_429_until_its_instant_then_the_script(api: Api) -> None:
    fail_until = time.time_ns() // 1_000_000 + 1_200
    with ModelServer("default", fail_until_epoch_ms=fail_until) as srv:
        status, headers, body = post(srv, api)
        assert status == 429
        if api.name == "anthropic":
            reset = datetime.fromisoformat(headers["anthropic-ratelimit-requests-reset"])
            assert reset == datetime.fromtimestamp(fail_until // 1000, UTC)
        elif api.name == "gemini":
            delay = float(body["error"]["details"][1]["retryDelay"].removesuffix("s"))
            assert abs(time.time() + delay - fail_until / 1000) < 1
        else:
            assert abs(time.time() * 1000 + int(headers["retry-after-ms"]) - fail_until) < 1000
        time.sleep(max(0.0, fail_until / 1000 - time.time()) + 0.05)
        status, _, raw = call(srv, api.path, api.body)
    assert status == 200
    assert b"hello.txt" in raw


def test_command_line_fail_for_seconds_opens_a_window(tmp_path: Path) -> None:
    window = ("--script", "default", "--fail-for-seconds", "30")
    with served(tmp_path / "port", *window) as (process, srv_port, _):
        api = APIS["chat"]
        request_body = json.dumps(api.body).encode()
        request = urllib.request.Request(
            f"http://127.0.0.1:{srv_port}{api.path}", data=request_body, method="POST"
        )
        with pytest.raises(urllib.error.HTTPError) as caught:
            urllib.request.urlopen(request, timeout=10)
        with caught.value as error:
            assert error.code == 429
            assert 25 <= int(error.headers["retry-after"]) <= 30
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=10) == 0


def test_command_line_refuses_a_negative_window() -> None:
    done = subprocess.run(
        [*MODULE, "--fail-for-seconds", "-1"],
        capture_output=True,
        text=True,
        env=module_env(),
        check=False,
    )
    assert done.returncode == 2
    assert "must not be negative" in done.stderr
