"""Every adapter's argv, run for real: the prompt is never split or shell-interpreted.

Issue anthropics/claude-plugins-official#748: prompts holding ``'`` ``"`` ``$()`` backticks ``;`` ``#`` ``*`` ``[x]``
and newlines must reach the agent unchanged, as one argv element or on stdin.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from autopilot.agents.base import AgentAdapter, InvocationRequest
from autopilot.agents.registry import AGENT_NAMES, make_adapter
from autopilot.errors import AgentNotFoundError, UsageError

PROMPT = (
    "Skill('devkit:git:code-review') 1) check 2) fix 3) done; Bob's \"quoted\" code\n"
    "Fix the $(hostname) placeholder and `uname -a` # not a comment\n"
    "- [ ] *.ts\n- [x] (2 Untested, 5 Failed) && echo pwned | cat > /tmp/x\n"
)
CLIS = [name for name in AGENT_NAMES if name not in ("command", "demo")]
ON_STDIN = {"claude", "opencode"}
"""Adapters that always pass the prompt on stdin (Claude by design; opencode because
``run`` re-quotes argv messages)."""


@pytest.fixture
def echo_agent(tmp_path: Path) -> Path:
    """A stand-in CLI that prints its argv and stdin as JSON."""
    script = tmp_path / "agent"
    script.write_text(
        f"#!{sys.executable}\n"
        "import json, sys\n"
        "json.dump({'argv': sys.argv[1:], 'stdin': sys.stdin.read()}, sys.stdout)\n"
    )
    script.chmod(0o755)
    return script


def _adapter(name: str, executable: Path) -> AgentAdapter:
    adapter = make_adapter(name)
    adapter.executable = str(executable)  # type: ignore[attr-defined]
    return adapter


def _launch(adapter: AgentAdapter, request: InvocationRequest) -> dict[str, object]:
    invocation = adapter.build_invocation(request)
    done = subprocess.run(
        invocation.argv,
        input=invocation.stdin,
        stdin=subprocess.DEVNULL if invocation.stdin is None else None,
        capture_output=True,
        check=True,
        timeout=30,
    )
    result: dict[str, object] = json.loads(done.stdout)
    return result


@pytest.mark.parametrize("name", CLIS)
def test_prompt_with_shell_metacharacters_arrives_unchanged(name: str, echo_agent: Path) -> None:
    request = InvocationRequest(PROMPT, Path("/tmp/prompt.md"), Path("/repo"), model="m")
    seen = _launch(_adapter(name, echo_agent), request)
    argv = seen["argv"]
    assert isinstance(argv, list)
    if name in ON_STDIN:
        assert seen["stdin"] == PROMPT
        assert not any("hostname" in arg for arg in argv)
    else:
        assert seen["stdin"] == ""  # /dev/null: the CLI must not add stdin to the prompt
        assert argv.count(PROMPT) == 1
        before = argv[argv.index(PROMPT) - 1]
        assert before in ("-p", "--message", "--") or argv[-1] == PROMPT


UUID = "eab24a57-a0dc-4669-98eb-2837131cf8d3"
OPENCODE_SESSION = "ses_dd47b8f11ffei6FPhEN6YmJz3N"
RESUME = {
    "claude": ["--resume", UUID],
    "codex": ["resume", UUID],
    "pi": ["--session", UUID],
    "gemini": ["--resume", UUID],
    "copilot": [f"--resume={UUID}"],
    "opencode": ["--session", OPENCODE_SESSION],
}


def _resume_request(tmp_path: Path, session: str) -> InvocationRequest:
    return InvocationRequest("go on", tmp_path / "p.md", Path("/repo"), resume_session_id=session)


@pytest.mark.parametrize("name", sorted(RESUME))
def test_resume_argv(name: str, echo_agent: Path, tmp_path: Path) -> None:
    session = OPENCODE_SESSION if name == "opencode" else UUID
    adapter = _adapter(name, echo_agent)
    assert adapter.supports_sessions is True
    argv = adapter.build_invocation(_resume_request(tmp_path, session)).argv
    flag = RESUME[name]
    assert any(argv[i : i + len(flag)] == flag for i in range(len(argv)))


@pytest.mark.parametrize("name", sorted(RESUME))
@pytest.mark.parametrize("session", ["--help", "-c", "x; rm -rf ~", UUID + "\n", "latest"])
def test_a_session_id_of_another_shape_never_reaches_argv(
    name: str, session: str, echo_agent: Path, tmp_path: Path
) -> None:
    adapter = _adapter(name, echo_agent)
    argv = adapter.build_invocation(_resume_request(tmp_path, session)).argv
    assert session not in argv and not any(arg.endswith(session) for arg in argv), argv
    assert not any(arg.startswith("--resume") or arg in ("resume", "--session") for arg in argv)


@pytest.mark.parametrize("name", CLIS)
def test_missing_cli_names_its_install_command(
    name: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    adapter = make_adapter(name)
    with pytest.raises(AgentNotFoundError, match="install"):
        adapter.check_installed()


@pytest.mark.parametrize("name", CLIS)
def test_executable_override_from_environment(
    name: str, monkeypatch: pytest.MonkeyPatch, echo_agent: Path
) -> None:
    monkeypatch.setenv(f"AUTOPILOT_{name.upper()}_BIN", str(echo_agent))
    adapter = make_adapter(name)
    adapter.check_installed()
    request = InvocationRequest("hi", Path("/tmp/prompt.md"), Path("/repo"))
    assert adapter.build_invocation(request).argv[0] == str(echo_agent)


def test_every_adapter_names_its_verified_version() -> None:
    versions = {name: make_adapter(name).verified_version for name in CLIS}
    assert versions == {
        "claude": "2.1.197",
        "codex": "0.171.0",
        "pi": "0.73.1",
        "gemini": "0.61.0",
        "copilot": "1.0.102",
        "opencode": "1.18.33",
        "aider": "0.86.2",
    }


def test_a_command_agent_refuses_an_argument_over_the_os_limit(tmp_path: Path) -> None:
    adapter = make_adapter("command", command=("true",), prompt_via="arg")
    fits = InvocationRequest("x" * 131_071, tmp_path / "p.md", tmp_path)
    assert adapter.build_invocation(fits).argv[-1] == fits.prompt
    over = InvocationRequest("é" * 70_000, tmp_path / "p.md", tmp_path)
    with pytest.raises(UsageError, match="the prompt is 140000 bytes, over the 131071 bytes"):
        adapter.build_invocation(over)
    stdin = make_adapter("command", command=("true",), prompt_via="stdin")
    assert stdin.build_invocation(over).stdin == over.prompt.encode()
