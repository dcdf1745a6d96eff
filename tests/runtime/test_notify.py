"""Notifications through apprise, against a local HTTP endpoint on 127.0.0.1
(apprise's ``json://``): what notifies, that a slow or failing notifier never holds
the run, and that a failure is reported once."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from autopilot.config import RunConfig
from autopilot.config_sources import build_config
from autopilot.errors import StateFileError, UsageError
from autopilot.loop.notify import (
    Notification,
    Notifier,
    Tone,
    check_urls,
    notification_for,
    redact,
)
from tests.cli.test_control import _events, _run_dir
from tests.conftest import FakeAgent, run_cli
from tests.runtime.webhook import Endpoint, serve


@pytest.fixture
def endpoint() -> Iterator[Endpoint]:
    with serve() as point:
        yield point


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_which_events_notify() -> None:
    run = "r-1"
    done = notification_for({"type": "complete", "reason": "completion_promise"}, run)
    assert done is not None and done.tone is Tone.SUCCESS and run in done.title
    stopped = notification_for({"type": "abort", "reason": "user_stopped"}, run)
    assert stopped is not None and stopped.tone is Tone.WARNING
    gaveup = notification_for({"type": "abort", "reason": "supervisor_giveup"}, run)
    assert gaveup is not None and gaveup.tone is Tone.FAILURE
    assert notification_for({"type": "supervisor_giveup", "note": "6 crashes"}, run) is not None
    gate = notification_for({"type": "gate", "question": "Use Postgres?"}, run)
    assert gate is not None and "Use Postgres?" in gate.body and "autopilot answer" in gate.body
    for state in ("answered", "released"):  # nobody is waited for any more
        assert notification_for({"type": "gate", "state": state, "question": "Q?"}, run) is None
    short = {"type": "rate_limited", "ts": 0, "waitingUntil": 5 * 60 * 1000}
    long = {"type": "rate_limited", "ts": 0, "waitingUntil": 11 * 60 * 1000}
    assert notification_for(short, run) is None
    assert notification_for(long, run) is not None
    for quiet in ("iteration_end", "message_queued", "warning", "pause"):
        assert notification_for({"type": quiet}, run) is None


def test_a_notification_reaches_a_local_webhook(endpoint: Endpoint) -> None:
    notifier = Notifier([endpoint.url])
    notifier.send(Notification("autopilot: r completed", "completed (backlog_done)", Tone.SUCCESS))
    assert notifier.close(30) is True
    assert notifier.drain_failures() == []
    [body] = endpoint.bodies
    assert (body["title"], body["message"], body["type"]) == (
        "autopilot: r completed",
        "completed (backlog_done)",
        "success",
    )
    assert notifier.drain_failures() == []


def test_a_failing_notifier_is_reported_once_without_its_token() -> None:
    url = f"json://user:s3cret@127.0.0.1:{_free_port()}/hook"
    notifier = Notifier([url])
    for _ in range(3):
        notifier.send(Notification("t", "b", Tone.INFO))
        notifier.close(30)
    [failure] = notifier.drain_failures()
    assert url.replace("user:s3cret", "[REDACTED]") in failure and "s3cret" not in failure
    assert notifier.drain_failures() == []


def test_a_hanging_notifier_never_holds_the_caller(endpoint: Endpoint) -> None:
    endpoint.hang = threading.Event()
    notifier = Notifier([endpoint.url])
    notifier.send(Notification("t", "b", Tone.INFO))  # returns while the server hangs
    assert endpoint.got.wait(30)
    assert notifier.close(0.2) is False  # bounded: abandoned, not waited for
    endpoint.hang.set()


def test_urls_are_checked_and_redacted() -> None:
    assert check_urls(["json://127.0.0.1:1/x", "ntfy://topic"]) == (
        "json://127.0.0.1:1/x",
        "ntfy://topic",
    )
    with pytest.raises(UsageError, match="apprise supports"):
        check_urls(["nosuchscheme://x"])
    # Shown as given (the port and path notifications go to), credentials hidden.
    assert redact("json://127.0.0.1:8080/hook") == "json://127.0.0.1:8080/hook"
    assert redact("ntfys://ntfy.example.org/topic") == "ntfys://ntfy.example.org/topic"
    assert redact("ntfy://topic") == "ntfy://topic"
    assert (
        redact("json://u:p@hooks.example.com:8/p?token=1&format=json")
        == "json://[REDACTED]@hooks.example.com:8/p?token=[REDACTED]&format=json"
    )
    assert (
        redact("slack://T1JJ3T3L2/A1BRTD4JD/TIiajkdnlazkcOXrIdevi7FQ/#general")
        == "slack://T1JJ3T3L2/A1BRTD4JD/[REDACTED]/#general"
    )
    assert redact("json://hooks.example.com/xoxb-12345-abcdef") == (
        "json://hooks.example.com/xoxb-[REDACTED]"
    )


def test_notify_comes_from_flags_environment_or_config_lists(tmp_path: Path) -> None:
    config_dir = tmp_path / ".autopilot"
    config_dir.mkdir()
    (config_dir / "config.toml").write_text('notify = ["ntfy://a", "json://127.0.0.1:1/b"]\n')
    assert build_config({}, project=tmp_path, environ={}).notify == (
        "ntfy://a",
        "json://127.0.0.1:1/b",
    )
    env = {"AUTOPILOT_NOTIFY": "ntfy://from-env"}
    assert build_config({}, project=tmp_path, environ=env).notify == ("ntfy://from-env",)
    flags = {"notify": "ntfy://x ntfy://y"}
    assert build_config(flags, project=tmp_path, environ=env).notify == ("ntfy://x", "ntfy://y")
    (config_dir / "config.toml").write_text("notify = [1, 2]\n")
    with pytest.raises(UsageError, match="list of strings"):
        build_config({}, project=tmp_path, environ={})
    with pytest.raises(UsageError, match="notification URLs"):
        build_config({"notify": "not-a-url"}, project=tmp_path / "none", environ={})
    config = RunConfig(notify=("ntfy://a",))
    assert RunConfig.from_json(config.to_json()) == config
    with pytest.raises(StateFileError):
        RunConfig.from_json({**config.to_json(), "notify": "ntfy://a"})


def test_a_run_notifies_its_end_and_a_bad_url_is_a_usage_error(
    tmp_path: Path, repo: Path, fake_agent: FakeAgent, endpoint: Endpoint
) -> None:
    env = fake_agent([[{"result": "All done.\nCOMPLETE"}]])
    bad = run_cli(["run", "-p", "x", "--notify", "nosuch://x", "--plain"], cwd=repo, env=env)
    assert bad.returncode == 2 and "apprise supports" in bad.stderr
    done = run_cli(["run", "-p", "x", "--notify", endpoint.url, "--plain"], cwd=repo, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "autopilot: notify json://127.0.0.1" in done.stdout
    [body] = endpoint.bodies
    assert body["type"] == "success" and "completed (completion_promise)" in body["message"]


def test_a_run_with_a_dead_notifier_goes_on_and_says_so_once(
    tmp_path: Path, repo: Path, fake_agent: FakeAgent
) -> None:
    env = fake_agent([[{"write_file": "a.txt"}, {"result": "step"}], [{"result": "COMPLETE"}]])
    url = f"json://127.0.0.1:{_free_port()}/hook"
    done = run_cli(["run", "-p", "x", "--notify", url, "--plain"], cwd=repo, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    folder = _run_dir(tmp_path)
    warnings = [e for e in _events(folder) if e["type"] == "warning" and "notif" in str(e)]
    assert len(warnings) == 1


def test_run_echoes_the_notify_url_it_will_post_to(repo: Path, fake_agent: FakeAgent) -> None:
    env = fake_agent([[{"result": "COMPLETE"}]])
    url = "json://alice:s3cret@127.0.0.1:9/hooks/autopilot?token=abc&format=json"
    done = run_cli(["run", "-p", "work", "--plain", "--notify", url], cwd=repo, env=env)
    [line] = [s for s in done.stdout.splitlines() if s.startswith("autopilot: notify ")]
    assert line == (
        "autopilot: notify json://[REDACTED]@127.0.0.1:9/hooks/autopilot"
        "?token=[REDACTED]&format=json"
    )
    assert "s3cret" not in done.stdout + done.stderr and "abc" not in line
