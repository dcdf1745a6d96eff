"""Tool calls a permission rule refused, read from each CLI's own output.

The lines are real output (trimmed) of runs against the project's scripted model
server with a deny rule: Claude Code 2.1.197 (``--settings`` deny ``Bash(cat:*)``),
Gemini CLI 0.61.0 (``--policy`` deny ``run_shell_command`` with prefix ``cat``), Copilot
CLI 1.0.102 (``--deny-tool shell``) and opencode 1.18.33 (``permission.bash``
``"cat *": "deny"``); Codex's ``declined`` status is from ``exec_events.rs``.
"""

from __future__ import annotations

from typing import Any

import pytest

from autopilot.agents.base import AgentAdapter, PermissionDenial
from autopilot.agents.claude import ClaudeAdapter
from autopilot.agents.codex import CodexAdapter
from autopilot.agents.copilot import CopilotAdapter
from autopilot.agents.gemini import GeminiAdapter
from autopilot.agents.opencode import OpencodeAdapter
from autopilot.agents.pi import PiAdapter
from tests.agents.streams import run_lines

CAT = "cat hello.txt 2>/dev/null || echo MISSING"
DENIED_CAT = {"command": CAT, "description": f"Run {CAT}"}

CLAUDE = [
    {
        "type": "result",
        "subtype": "success",
        "is_error": False,
        "result": "wrote hello.txt; will verify next iteration.",
        "session_id": "d28ab56f-13ac-413d-9db0-8e96ae0be89e",
        "permission_denials": [
            {
                "tool_name": "Bash",
                "tool_use_id": "toolu_0ada26c62a6cde2706d3f958",
                "tool_input": DENIED_CAT,
            }
        ],
    }
]
GEMINI = [
    {
        "type": "tool_use",
        "tool_name": "run_shell_command",
        "tool_id": "run_shell_command__run_shell_command_1796133951832_0",
        "parameters": DENIED_CAT,
    },
    {
        "type": "tool_result",
        "tool_id": "run_shell_command__run_shell_command_1796133951832_0",
        "status": "error",
        "output": "Tool execution denied by policy.",
        "error": {"type": "policy_violation", "message": "Tool execution denied by policy."},
    },
    {"type": "result", "status": "success", "stats": {"input_tokens": 200, "output_tokens": 40}},
]
COPILOT = [
    {
        "type": "tool.execution_start",
        "data": {
            "toolCallId": "call_590fc651c388421c22077e42",
            "toolName": "bash",
            "arguments": DENIED_CAT,
        },
    },
    {
        "type": "tool.execution_complete",
        "data": {
            "toolCallId": "call_590fc651c388421c22077e42",
            "success": False,
            "error": {
                "message": "Permission to run this tool was denied due to the following "
                "rules: `shell`",
                "code": "denied",
            },
        },
    },
    {"type": "result", "sessionId": "bab8ba16-6543-4592-bf34-8408597e6bbe", "exitCode": 0},
]
OPENCODE = [
    {
        "type": "tool_use",
        "sessionID": "ses_dce12a73bffe0vZabHAAw3sIXM",
        "part": {
            "type": "tool",
            "tool": "bash",
            "callID": "call_011b093e8d2363705855c5d3",
            "state": {
                "status": "error",
                "input": {"command": CAT},
                "error": "The user has specified a rule which prevents you from using this "
                'specific tool call. Here are some of the relevant rules [{"permission":'
                '"bash","pattern":"cat *","action":"deny"}]',
            },
        },
    },
    {
        "type": "step_finish",
        "sessionID": "ses_dce12a73bffe0vZabHAAw3sIXM",
        "part": {"reason": "stop", "tokens": {"input": 100, "output": 20}, "cost": 0},
    },
]
CODEX = [
    {"type": "thread.started", "thread_id": "01a22b71-8fe7-7a43-8a4e-620fbc93ca16"},
    {
        "type": "item.completed",
        "item": {
            "id": "item_1",
            "type": "command_execution",
            "command": f"/bin/bash -lc '{CAT}'",
            "aggregated_output": "",
            "exit_code": None,
            "status": "declined",
        },
    },
    {"type": "turn.completed", "usage": {"input_tokens": 24, "output_tokens": 10}},
]
CASES: dict[str, tuple[AgentAdapter, list[Any], PermissionDenial]] = {
    "claude": (ClaudeAdapter("claude"), CLAUDE, PermissionDenial("Bash", CAT)),
    "gemini": (GeminiAdapter("gemini"), GEMINI, PermissionDenial("run_shell_command", CAT)),
    "copilot": (CopilotAdapter("copilot"), COPILOT, PermissionDenial("bash", CAT)),
    "opencode": (OpencodeAdapter("opencode"), OPENCODE, PermissionDenial("bash", CAT)),
    "codex": (
        CodexAdapter("codex"),
        CODEX,
        PermissionDenial("command_execution", f"/bin/bash -lc '{CAT}'"),
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_denied_tool_call_is_read(name: str) -> None:
    adapter, lines, denial = CASES[name]
    result = run_lines(adapter, lines)
    assert result.report.permission_denials == (denial,)
    assert result.verdict.ok  # a denial is not a failure of the iteration


def test_a_tool_that_failed_for_another_reason_is_no_denial() -> None:
    failed = {**GEMINI[1], "error": {"type": "execution_failed", "message": "exit 1"}}
    result = run_lines(GeminiAdapter("gemini"), [GEMINI[0], failed, GEMINI[2]])
    assert result.report.permission_denials == ()
    plain = {**COPILOT[1], "data": {**COPILOT[1]["data"], "error": {"message": "x", "code": "x"}}}
    result = run_lines(CopilotAdapter("copilot"), [COPILOT[0], plain, COPILOT[2]])
    assert result.report.permission_denials == ()


def test_pi_has_no_permission_rules() -> None:
    lines = [
        {"type": "tool_execution_start", "toolName": "bash", "args": {"command": CAT}},
        {"type": "tool_execution_end", "toolName": "bash", "isError": True, "result": {}},
    ]
    assert run_lines(PiAdapter("pi"), lines).report.permission_denials == ()
