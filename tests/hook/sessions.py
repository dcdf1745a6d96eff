"""A Claude Code session without the CLI, for hook runs: arm a run, feed the session's
Stop inputs and transcript entries as Claude Code 2.1.197 writes them (docs/hooks.md),
and read what the run recorded."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, NamedTuple

from autopilot.config_sources import build_config
from autopilot.core.vocabulary import HookAgent
from autopilot.hook.arm import arm_hook_run
from autopilot.hook.stop import answer_stop
from autopilot.store.paths import runs_root
from autopilot.store.run_state import PromptSource
from tests.conftest import read_jsonl
from tests.fakes import FakeClock

SESSION = "5e55-1011"
PROMPT = "Fix the parser. Say COMPLETE when the tests pass."


class Session:
    """One Claude Code session in ``project``: its transcript and its Stop inputs."""

    def __init__(self, tmp_path: Path, project: Path, session_id: str = SESSION) -> None:
        self.project = project
        self.session_id = session_id
        self.transcript = tmp_path / f"{session_id}.jsonl"
        self.transcript.write_text("")
        self.count = 0

    def prompt(self, text: str) -> None:
        self._append({"type": "user", "message": {"role": "user", "content": text}})

    def say(self, text: str, cost_usd: float | None = None) -> None:
        """An assistant entry of 100 input and 10 output tokens; ``cost_usd`` as Claude
        Code versions before 2.1.197 recorded it (``costUSD``)."""
        self.count += 1
        entry: dict[str, Any] = {
            "type": "assistant",
            "uuid": f"a{self.count}",
            "message": {
                "id": f"m{self.count}",
                "content": [{"type": "text", "text": text}],
                "usage": {"input_tokens": 100, "output_tokens": 10},
            },
        }
        if cost_usd is not None:
            entry["costUSD"] = cost_usd
        self._append(entry)

    def _append(self, entry: dict[str, Any]) -> None:
        with self.transcript.open("a") as handle:
            handle.write(json.dumps(entry) + "\n")

    def stop_input(self, *, active: bool = False, last: str | None = None) -> bytes:
        """The Stop hook's stdin for this session: ``stop_hook_active`` is ``active``;
        ``last`` is its ``last_assistant_message`` (left out when None)."""
        data: dict[str, Any] = {
            "session_id": self.session_id,
            "transcript_path": str(self.transcript),
            "cwd": str(self.project),
            "hook_event_name": "Stop",
            "stop_hook_active": active,
        }
        if last is not None:
            data["last_assistant_message"] = last
        return json.dumps(data).encode()

    def stop(
        self,
        clock: FakeClock,
        *,
        active: bool = False,
        last: str | None = None,
        environ: dict[str, str] | None = None,
    ) -> str:
        """This session's Stop answered in this process (``answer_stop``)."""
        data = self.stop_input(active=active, last=last)
        return answer_stop(HookAgent.CLAUDE, data, clock=clock, environ=environ or {})


def arm(
    project: Path,
    clock: FakeClock,
    session: str | None = None,
    *,
    prompt: str | None = PROMPT,
    backlog: bool = False,
    **flags: str,
) -> str:
    """Arm a Claude Code hook run in ``project`` for ``session`` (None: the first Stop
    claims it) with ``prompt`` (None: none, a backlog run's) and the CLI's ``flags``;
    its run id."""
    config = build_config({"agent": "claude", **flags}, project=project)
    source = PromptSource(text=prompt) if prompt is not None else PromptSource()
    armed = arm_hook_run(
        runs_root(), config, source, project, HookAgent.CLAUDE, session, clock, backlog=backlog
    )
    return armed.run_id


class ArmedSession(NamedTuple):
    """A run armed for a session, the session, and the clock both go by."""

    clock: FakeClock
    run_id: str
    session: Session


def armed_session(
    tmp_path: Path,
    project: Path,
    session_id: str = SESSION,
    *,
    prompt: str | None = PROMPT,
    backlog: bool = False,
    **flags: str,
) -> ArmedSession:
    """A run armed for ``session_id`` (``arm``) and that session, on a ``FakeClock``."""
    clock = FakeClock()
    run_id = arm(project, clock, session_id, prompt=prompt, backlog=backlog, **flags)
    return ArmedSession(clock, run_id, Session(tmp_path, project, session_id))


def events_of(run_id: str) -> list[dict[str, Any]]:
    """The run's ``events.jsonl``."""
    return read_jsonl(runs_root() / run_id / "events.jsonl")


def state_of(run_id: str) -> dict[str, Any]:
    """The run's ``state.json`` as JSON."""
    loaded: dict[str, Any] = json.loads((runs_root() / run_id / "state.json").read_text())
    return loaded


def kinds_of(run_id: str, *types: str) -> list[tuple[str, Any]]:
    """The run's events of ``types``: each type with its iteration (else its reason)."""
    return [
        (e["type"], e.get("iteration", e.get("reason")))
        for e in events_of(run_id)
        if e["type"] in types
    ]


def blocks(answer: str) -> str:
    """The prompt of a Stop answer that blocks (continues the session); fails otherwise."""
    value = json.loads(answer)
    assert value["decision"] == "block", value
    return str(value["reason"])
