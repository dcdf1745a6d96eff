"""A scripted model server that lets the real agent CLIs run offline.

One stateless server speaks four wire APIs, chosen by the request path, so every CLI
can be pointed at it:

- Claude Code: Anthropic Messages, ``POST /v1/messages`` (:mod:`.anthropic`)
- Codex: OpenAI Responses, ``POST /v1/responses`` (:mod:`.responses`)
- pi, Copilot CLI, opencode: OpenAI Chat Completions, ``POST /v1/chat/completions``
  (:mod:`.chat`)
- Gemini CLI: ``POST /v1beta/models/<m>:streamGenerateContent?alt=sse``
  (:mod:`.gemini`)

Every answer follows from the conversation in the request (:mod:`.conversation`
counts turns and steps); scripts (:mod:`.scripts`) decide a logical action; the tool
mapping (:mod:`.tools`) names the CLI's real tools; the wire renders bytes; the HTTP
shell (:mod:`.server`) writes them::

    body --Wire.conversation()--> Conversation --decide()--> Action
    Action --tools.reply()--> Reply --Wire.stream()/message()/error()--> bytes

Failure scripts (401, 429 with and without reset fields, usage limit, 500, slow,
stalled and dropped streams) are rendered by each wire as its API does.

Recovery: a server built with ``fail_until_epoch_ms``, or with ``fail_for_seconds``
(command line: ``--fail-for-seconds N``, a window that opens at the first tools-bearing
request, so a client slow to start still meets it), answers every tools-bearing request
with a 429 whose ``retry-after`` and reset fields name exactly the window's end, and
follows its script once it has passed. This works with any script; ``recover-429`` is
``default`` with a 10 s window of its own when none is given.

Base URLs: ``ModelServer.base_url`` for Claude Code (``ANTHROPIC_BASE_URL``) and Gemini
CLI (``GOOGLE_GEMINI_BASE_URL``); ``base_url + "/v1"`` for Codex, pi, Copilot and
opencode, which append ``/responses`` or ``/chat/completions`` themselves.

Run it as ``python -m autopilot.testkit.model_server --script default --port-file F``
or in-process with :class:`ModelServer`.
"""

from autopilot.testkit.model_server.anthropic import AnthropicWire
from autopilot.testkit.model_server.chat import ChatWire
from autopilot.testkit.model_server.cli import main, write_port_file
from autopilot.testkit.model_server.conversation import (
    Conversation,
    Entry,
    EntryKind,
    ToolSpec,
    read_transcript,
)
from autopilot.testkit.model_server.gemini import GeminiWire
from autopilot.testkit.model_server.library import SCRIPTS, get_script
from autopilot.testkit.model_server.responses import ResponsesWire
from autopilot.testkit.model_server.scripts import (
    Action,
    Content,
    Drop,
    ErrorKind,
    HttpError,
    Rule,
    RunShell,
    Say,
    Script,
    Slow,
    Stall,
    WriteFile,
    decide,
)
from autopilot.testkit.model_server.server import ModelServer, RecordedRequest
from autopilot.testkit.model_server.tools import Reply, ToolCall, narration, reply
from autopilot.testkit.model_server.wire import (
    INPUT_TOKENS,
    OUTPUT_TOKENS,
    ErrorAnswer,
    Request,
    Wire,
    request_seed,
)

__all__ = [
    "INPUT_TOKENS",
    "OUTPUT_TOKENS",
    "SCRIPTS",
    "Action",
    "AnthropicWire",
    "ChatWire",
    "Content",
    "Conversation",
    "Drop",
    "Entry",
    "EntryKind",
    "ErrorAnswer",
    "ErrorKind",
    "GeminiWire",
    "HttpError",
    "ModelServer",
    "RecordedRequest",
    "Reply",
    "Request",
    "ResponsesWire",
    "Rule",
    "RunShell",
    "Say",
    "Script",
    "Slow",
    "Stall",
    "ToolCall",
    "ToolSpec",
    "Wire",
    "WriteFile",
    "decide",
    "get_script",
    "main",
    "narration",
    "read_transcript",
    "reply",
    "request_seed",
    "write_port_file",
]
