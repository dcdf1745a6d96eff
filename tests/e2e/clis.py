"""The per-CLI setup table of the end-to-end scenarios (``test_clis.py``).

Each ``Cli`` says how one real agent CLI is pointed at the scripted model server
offline (environment, config files), what ``autopilot run`` passes it, the argv it
must be started with, and what its own output says in each scenario. Facts:

* Claude Code takes the base URL from ``ANTHROPIC_BASE_URL``; with
  ``CLAUDE_CODE_MAX_RETRIES=0`` it does not retry. ``CLAUDECODE=1`` is set to prove
  the driver removes that nesting marker.
* Codex reads its provider's base URL only from ``config.toml`` (a template the
  offline runner fills in) and does not retry a 429 itself
  (``request_max_retries = 0``): recovery is autopilot's own.
* pi reads its provider from ``models.json``; the model has a price, so pi reports a
  cost. pi exits 0 even when the model call failed.
* Gemini CLI takes the base URL from ``GOOGLE_GEMINI_BASE_URL``; ``settings.json``
  selects API-key auth (otherwise 0.61 resolves to ``gateway`` and exits 41) and
  lowers ``maxAttempts``. The adapter trusts the folder itself. API errors exit with
  the HTTP status mod 256.
* Copilot CLI takes a custom provider (BYOK) from the environment;
  ``COPILOT_OFFLINE=true`` skips GitHub auth, telemetry and auto-update. The key is
  long because Copilot masks the key's text wherever it appears in its output.
* opencode reads its provider from the file ``OPENCODE_CONFIG`` names; the model has
  a price. The prompt (with quotes and spaces) goes on stdin and must arrive verbatim.

pi, Gemini, Copilot and opencode wait out a 429 with ``retry-after`` themselves.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.e2e.conftest import E2ERun, sent_prompt

PROMPT = "Make sure hello.txt exists. When it does, say COMPLETE.\n"
LIMITS = ("--iteration-timeout", "120", "--idle-timeout", "60")
PROVIDER_KEY = "fake-provider-key-0123456789abcdef"


@dataclass(frozen=True)
class Setup:
    """What the offline runner needs for one CLI: variables to set (``{base_url}`` is
    filled in), templates to copy, variables of this environment to remove."""

    set_env: dict[str, str]
    templates: dict[Path, Path] = field(default_factory=dict)
    unset_env: tuple[str, ...] = ()


@dataclass(frozen=True)
class Cli:
    """One agent CLI in the scenarios.

    Attributes:
        name: ``--agent`` name and the program's name.
        setup: Prepares ``tmp_path`` and returns the runner's ``Setup``.
        argv: The argv it must be started with (program left out) in iteration N
            of the run, resuming the given session (or None) with the given agent
            arguments; a prompt in argv is the one autopilot sent (``sent_prompt``).
        run_args: Further ``autopilot run`` options (a model, limits).
        api_prefixes: The model API paths it calls.
        cost: It reports a cost.
        auth_words: Its own words about a refused key (in the abort note).
        auth_exit_code: Its exit status after a refused key.
        recovers_itself: It waits out a 429 itself (else autopilot waits).
        window_seconds: The 429 window, from the server's start: long enough that
            the CLI's first model call falls inside it on a slow machine.
        prompt: The prompt; opencode's has quotes that must arrive verbatim.
        continue_args: Agent arguments (after ``--``) for the ``--continue`` run.
        check_fresh, check_continue, check_auth, check_limit: Further checks of
            each scenario's run.
    """

    name: str
    setup: Callable[[Path], Setup]
    argv: Callable[[E2ERun, Path, int, str | None, tuple[str, ...]], list[str]]
    run_args: tuple[str, ...] = LIMITS
    api_prefixes: tuple[str, ...] = ("/v1/chat/completions",)
    cost: bool = False
    auth_words: tuple[str, ...] = ()
    auth_exit_code: int = 1
    recovers_itself: bool | None = True
    window_seconds: float = 5
    prompt: str = PROMPT
    continue_args: tuple[str, ...] = ()
    check_fresh: Callable[[E2ERun], None] = lambda run: None
    check_continue: Callable[[E2ERun], None] = lambda run: None
    check_auth: Callable[[E2ERun], None] = lambda run: None
    check_limit: Callable[[E2ERun], None] = lambda run: None


def _resume(flag: str, session: str | None) -> list[str]:
    return [flag, session] if session else []


def _claude(tmp_path: Path) -> Setup:
    return Setup(
        {
            "ANTHROPIC_BASE_URL": "{base_url}",
            "ANTHROPIC_API_KEY": "dummy",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "CLAUDE_CODE_MAX_RETRIES": "0",
            "CLAUDECODE": "1",
        }
    )


def _claude_argv(
    run: E2ERun, repo: Path, iteration: int, session: str | None, extra: tuple[str, ...]
) -> list[str]:
    # The prompt goes on stdin.
    fixed = ["-p", "--output-format", "stream-json", "--verbose", "--dangerously-skip-permissions"]
    return [*fixed, *_resume("--resume", session)]


CODEX_CONFIG = """\
model = "gpt-5.5"
model_provider = "fake"
approval_policy = "never"
sandbox_mode = "danger-full-access"
check_for_update_on_startup = false

[model_providers.fake]
name = "fake"
base_url = "{base_url}/v1"
env_key = "FAKE_API_KEY"
wire_api = "responses"
request_max_retries = 0
stream_max_retries = 0

[analytics]
enabled = false

[features]
plugins = false
remote_plugin = false
apps = false
unbounded_connection_retries = false
"""


def _codex(tmp_path: Path) -> Setup:
    home = tmp_path / "codex-home"
    home.mkdir()
    template = tmp_path / "config.toml.template"
    template.write_text(CODEX_CONFIG)
    return Setup(
        {"CODEX_HOME": str(home), "FAKE_API_KEY": "dummy"},
        {template: home / "config.toml"},
        ("OPENAI_API_KEY", "OPENAI_BASE_URL", "CODEX_API_KEY"),
    )


def _codex_argv(
    run: E2ERun, repo: Path, iteration: int, session: str | None, extra: tuple[str, ...]
) -> list[str]:
    fixed = ["exec", "--json", "--dangerously-bypass-approvals-and-sandbox"]
    fixed += ["--skip-git-repo-check", "--disable", "unbounded_connection_retries"]
    # Agent arguments come before `resume`, where `codex exec` still reads options.
    resume = _resume("resume", session)
    return [*fixed, "-C", str(repo), *extra, *resume, "--", sent_prompt(run, iteration)]


def _codex_reasoning_effort(run: E2ERun) -> None:
    assert all(r["body"]["reasoning"]["effort"] == "low" for r in run.requests)


PI_MODELS = {
    "providers": {
        "fake": {
            "baseUrl": "{base_url}/v1",
            "api": "openai-completions",
            "apiKey": "dummy",
            "compat": {"supportsDeveloperRole": False, "supportsReasoningEffort": False},
            "models": [
                {
                    "id": "fake-model",
                    "contextWindow": 128000,
                    "maxTokens": 8192,
                    "cost": {"input": 1.0, "output": 2.0, "cacheRead": 0, "cacheWrite": 0},
                }
            ],
        }
    }
}


def _pi(tmp_path: Path) -> Setup:
    agent_dir = tmp_path / "pi-agent"
    agent_dir.mkdir()
    template = tmp_path / "models.json.template"
    template.write_text(json.dumps(PI_MODELS))
    return Setup(
        {"PI_CODING_AGENT_DIR": str(agent_dir), "PI_OFFLINE": "1", "PI_TELEMETRY": "0"},
        {template: agent_dir / "models.json"},
        ("OPENAI_API_KEY", "OPENAI_BASE_URL"),
    )


def _pi_argv(
    run: E2ERun, repo: Path, iteration: int, session: str | None, extra: tuple[str, ...]
) -> list[str]:
    fixed = ["--mode", "json", "--model", "fake/fake-model"]
    return [*fixed, *_resume("--session", session), sent_prompt(run, iteration)]


GEMINI_MODEL = "gemini-2.5-flash"
GEMINI_SETTINGS = {
    "security": {"auth": {"selectedType": "gemini-api-key"}},
    "privacy": {"usageStatisticsEnabled": False},
    "telemetry": {"enabled": False},
    "general": {
        "enableAutoUpdate": False,
        "enableAutoUpdateNotification": False,
        "maxAttempts": 3,
    },
}


def _gemini(tmp_path: Path) -> Setup:
    home = tmp_path / "home"
    (home / ".gemini").mkdir(parents=True)
    (home / ".gemini" / "settings.json").write_text(json.dumps(GEMINI_SETTINGS))
    return Setup(
        {
            "GEMINI_CLI_HOME": str(home),
            "GOOGLE_GEMINI_BASE_URL": "{base_url}",
            "GEMINI_API_KEY": PROVIDER_KEY,
        },
        unset_env=(
            "GEMINI_CLI_TRUST_WORKSPACE",
            "GOOGLE_API_KEY",
            "GOOGLE_GENAI_USE_VERTEXAI",
            "GOOGLE_GENAI_USE_GCA",
            "GOOGLE_CLOUD_PROJECT",
        ),
    )


def _gemini_argv(
    run: E2ERun, repo: Path, iteration: int, session: str | None, extra: tuple[str, ...]
) -> list[str]:
    fixed = ["--output-format", "stream-json", "--yolo", "--model", GEMINI_MODEL]
    return [*fixed, *_resume("--resume", session), "-p", sent_prompt(run, iteration)]


def _copilot(tmp_path: Path) -> Setup:
    home = tmp_path / "home" / ".copilot"
    home.mkdir(parents=True)
    return Setup(
        {
            "COPILOT_HOME": str(home),
            "COPILOT_OFFLINE": "true",
            "COPILOT_AUTO_UPDATE": "false",
            "COPILOT_PROVIDER_BASE_URL": "{base_url}/v1",
            "COPILOT_PROVIDER_TYPE": "openai",
            "COPILOT_MODEL": "fake-model",
            "COPILOT_PROVIDER_API_KEY": PROVIDER_KEY,
        },
        unset_env=("COPILOT_GITHUB_TOKEN", "GH_TOKEN", "GITHUB_TOKEN", "COPILOT_ALLOW_ALL"),
    )


def _copilot_argv(
    run: E2ERun, repo: Path, iteration: int, session: str | None, extra: tuple[str, ...]
) -> list[str]:
    usage_file = run.run_dir / f"iter-{iteration:04d}" / "copilot-usage.json"
    resume = [f"--resume={session}"] if session else []
    fixed = ["--output-format", "json", "--allow-all-tools", "--no-ask-user", "--no-auto-update"]
    usage = ["--usage-output-file", str(usage_file)]
    return [*fixed, "-C", str(repo), *resume, *usage, "-p", sent_prompt(run, iteration)]


def _copilot_retried(run: E2ERun) -> None:
    stdout = (run.run_dir / "iter-0001" / "stdout.log").read_text()
    assert '"type":"model.call_failure"' in stdout and '"statusCode":429' in stdout


OPENCODE_MODEL = "fake/fake-model"
OPENCODE_CONFIG = {
    "autoupdate": False,
    "share": "disabled",
    "model": OPENCODE_MODEL,
    "small_model": OPENCODE_MODEL,
    "provider": {
        "fake": {
            "npm": "@ai-sdk/openai-compatible",
            "name": "Fake",
            "options": {"baseURL": "{base_url}/v1", "apiKey": PROVIDER_KEY},
            "models": {
                "fake-model": {
                    "name": "Fake",
                    "tool_call": True,
                    "cost": {"input": 1.0, "output": 2.0},
                    "limit": {"context": 128000, "output": 8192},
                }
            },
        }
    },
}
OPENCODE_OFFLINE = {
    "OPENCODE_DISABLE_MODELS_FETCH": "1",
    "OPENCODE_DISABLE_AUTOUPDATE": "1",
    "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
    "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
    "OPENCODE_DISABLE_SHARE": "1",
}
# Quotes and spaces: the text must reach the model exactly as written.
OPENCODE_PROMPT = 'Make sure "hello.txt" exists. When it does, say COMPLETE.\n'


def _opencode(tmp_path: Path) -> Setup:
    template = tmp_path / "opencode.json.template"
    template.write_text(json.dumps(OPENCODE_CONFIG))
    config = tmp_path / "opencode-config" / "opencode.json"
    return Setup(
        {"OPENCODE_CONFIG": str(config), **OPENCODE_OFFLINE},
        {template: config},
        ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENCODE_CONFIG_CONTENT"),
    )


def _opencode_argv(
    run: E2ERun, repo: Path, iteration: int, session: str | None, extra: tuple[str, ...]
) -> list[str]:
    # No message argument: the prompt goes on stdin.
    fixed = ["run", "--format", "json", "--auto", "--model", OPENCODE_MODEL, "--dir", str(repo)]
    return [*fixed, *_resume("--session", session)]


def _user_texts(run: E2ERun) -> set[str]:
    """The text of every user message the CLI sent (Chat Completions)."""
    texts = set()
    for request in run.requests:
        body: Any = request["body"]
        for message in body.get("messages", []) if isinstance(body, dict) else []:
            if message.get("role") == "user":
                content = message.get("content")
                if isinstance(content, list):
                    content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
                texts.add(str(content))
    return texts


def _opencode_verbatim(run: E2ERun) -> None:
    # No message argument: the prompt went on stdin and arrived verbatim.
    assert sent_prompt(run) in _user_texts(run)


def _opencode_session(run: E2ERun) -> None:
    assert str(run.state["sessionId"]).startswith("ses_")


def _opencode_error_line(run: E2ERun) -> None:
    stdout = (run.run_dir / "iter-0001" / "stdout.log").read_text()
    assert '"statusCode":401' in stdout  # opencode's own error line, the note's source


CLIS = {
    "claude": Cli(
        "claude",
        _claude,
        _claude_argv,
        run_args=(),
        api_prefixes=("/v1/messages",),
        cost=True,
        auth_words=("Invalid API key",),
        recovers_itself=None,
    ),
    "codex": Cli(
        "codex",
        _codex,
        _codex_argv,
        api_prefixes=("/v1/responses",),
        auth_words=("unexpected status 401 Unauthorized",),
        recovers_itself=False,
        continue_args=("-c", 'model_reasoning_effort="low"'),
        check_continue=_codex_reasoning_effort,
    ),
    "pi": Cli(
        "pi",
        _pi,
        _pi_argv,
        run_args=("--model", "fake/fake-model", *LIMITS),
        cost=True,
        auth_words=("401 Incorrect API key provided",),
        auth_exit_code=0,  # pi exits 0 after a failed model call
        window_seconds=6,
    ),
    "gemini": Cli(
        "gemini",
        _gemini,
        _gemini_argv,
        run_args=("--model", GEMINI_MODEL, *LIMITS),
        api_prefixes=(f"/v1beta/models/{GEMINI_MODEL}:",),
        auth_words=("[API Error:", "invalid authentication credentials"),
        auth_exit_code=401 % 256,  # Gemini exits with the HTTP status
        window_seconds=8,  # its first model call comes ~2 s after the start
    ),
    "copilot": Cli(
        "copilot",
        _copilot,
        _copilot_argv,
        auth_words=("Authentication failed with provider at", "(HTTP 401)"),
        window_seconds=8,  # its first model call comes ~1.5 s after the start
        check_limit=_copilot_retried,
    ),
    "opencode": Cli(
        "opencode",
        _opencode,
        _opencode_argv,
        run_args=("--model", OPENCODE_MODEL, *LIMITS),
        cost=True,
        auth_words=("Incorrect API key provided",),
        prompt=OPENCODE_PROMPT,
        window_seconds=12,  # its first model call comes ~4 s after the start
        check_fresh=_opencode_verbatim,
        check_continue=_opencode_session,
        check_auth=_opencode_error_line,
    ),
}


@dataclass(frozen=True)
class HookCli:
    """One agent CLI whose interactive session autopilot's Stop hook continues
    (``test_hook.py``).

    Attributes:
        name: ``--agent`` name of ``hook install`` and ``arm``.
        setup: Prepares ``tmp_path`` and returns the runner's ``Setup``.
        argv: The session's argv (program left out) for its first prompt.
        answer: How an answer of the agent's stands in the CLI's stdout.
        slash_command: It has the ``/autopilot`` slash command.
    """

    name: str
    setup: Callable[[Path], Setup]
    argv: Callable[[str], list[str]]
    answer: Callable[[str], str]
    slash_command: bool = False


def _claude_session(prompt: str) -> list[str]:
    fixed = ["--output-format", "stream-json", "--verbose", "--dangerously-skip-permissions"]
    return ["-p", prompt, *fixed]


def _claude_hook(tmp_path: Path) -> Setup:
    # Not CLAUDECODE: the session is the user's own, not one nested in autopilot.
    env = {k: v for k, v in _claude(tmp_path).set_env.items() if k != "CLAUDECODE"}
    return Setup({**env, "IS_SANDBOX": "1"})


def _codex_session(prompt: str) -> list[str]:
    # Codex runs a hook only once it is trusted; --dangerously-bypass-hook-trust runs it
    # anyway, and --trust lets it read the project's .codex/hooks.json.
    fixed = ["exec", "--json", "--dangerously-bypass-approvals-and-sandbox"]
    fixed += ["--skip-git-repo-check", "--trust", "--dangerously-bypass-hook-trust"]
    return [*fixed, "--", prompt]


HOOK_CLIS = {
    "claude": HookCli(
        "claude",
        _claude_hook,
        _claude_session,
        answer=lambda text: f'"result":"{text}"',
        slash_command=True,
    ),
    "codex": HookCli("codex", _codex, _codex_session, answer=lambda text: f'"{text}"'),
}
