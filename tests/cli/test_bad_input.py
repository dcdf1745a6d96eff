"""Bad input through the real command line: one line on stderr, the right exit code,
no traceback, and nothing on disk changed."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from autopilot.cli import main as cli_main
from autopilot.cli import view_cmds
from autopilot.config_values import parse_duration_seconds, parse_float, parse_int
from autopilot.errors import UsageError
from autopilot.store.flock import FileLock
from autopilot.store.state import encode_state, read_state, read_state_json, write_atomically
from tests.cli.test_control import _wait_for
from tests.conftest import FakeAgent, read_jsonl, run_cli

Files = dict[str, bytes | None]


def _files(root: Path) -> Files:
    """Every path under ``root`` with its content (None for a directory)."""
    return {
        str(path.relative_to(root)): None if path.is_dir() else path.read_bytes()
        for path in sorted(root.rglob("*"))
    }


def _assert_one_line_error(
    done: subprocess.CompletedProcess[str], code: int, *fragments: str
) -> None:
    assert done.returncode == code, (done.returncode, done.stderr)
    assert "Traceback" not in done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and done.stderr.endswith("\n"), done.stderr
    assert lines[0].startswith("autopilot: "), lines[0]
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


# -- settings: flags, environment, config file -----------------------------------

CONFIG = ".autopilot/config.toml"


def _short_id(value: object) -> str:
    """Short test ids: a 200 kB id would not fit in ``PYTEST_CURRENT_TEST``."""
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:30]}…({len(text)})"


@pytest.mark.parametrize(
    ("args", "env", "toml", "message"),
    [
        (["--max-iterations", "²"], {}, None, "--max-iterations must be a whole number"),
        (["--max-iterations", "٣"], {}, None, "--max-iterations must be a whole number"),
        (["--max-iterations", "++5"], {}, None, "--max-iterations must be a whole number"),
        # Digits only: no sign, no "_", no other base; the same for flags, env and files.
        (["--max-iterations", "1_0"], {}, None, "--max-iterations must be a whole number"),
        (["--stagnation-limit", "+2"], {}, None, "--stagnation-limit must be a whole number"),
        ([], {"AUTOPILOT_MAX_ITERATIONS": "+2"}, None, "AUTOPILOT_MAX_ITERATIONS must be a whole"),
        ([], {"AUTOPILOT_MAX_TOKENS": "1_0"}, None, "AUTOPILOT_MAX_TOKENS must be a whole"),
        ([], {}, b"max_iterations = 1_0\n", "max_iterations in {config} must be a whole"),
        ([], {}, b"max_iterations = +2\n", "max_iterations in {config} must be a whole"),
        ([], {}, b'"min_iterations" = +2 # x\n', "min_iterations in {config} must be a whole"),
        ([], {}, b"stagnation_limit = 0x10\n", "stagnation_limit in {config} must be a whole"),
        ([], {}, b"max_tokens = 0o10\n", "max_tokens in {config} must be a whole number"),
        ([], {}, b'max_iterations = "1_0"\n', "max_iterations in {config} must be a whole"),
        (["--max-iterations", "9" * 5000], {}, None, "--max-iterations must be at most"),
        ([], {"AUTOPILOT_MAX_ITERATIONS": "²"}, None, "AUTOPILOT_MAX_ITERATIONS must be a whole"),
        ([], {}, b'max_iterations = "\xc2\xb2"\n', "max_iterations in {config} must be a whole"),
        ([], {}, b'stagnation_limit = "x"\n', "stagnation_limit in {config} must be a whole"),
        ([], {}, b'stagnation-limit = "x"\n', "stagnation-limit in {config} must be a whole"),
        (["--max-duration", "1e306"], {}, None, "--max-duration must be at most 10 years"),
        ([], {"AUTOPILOT_MAX_DURATION": "1e306"}, None, "AUTOPILOT_MAX_DURATION must be at most"),
        ([], {}, b"max_duration = 1e306\n", "max_duration in {config} must be at most 10 years"),
        ([], {}, b'max-duration = "1e306"\n', "max-duration in {config} must be at most"),
        (["--iteration-timeout", "9" * 400 + "w"], {}, None, "--iteration-timeout must be at most"),
        (["--idle-timeout", "3651 days"], {}, None, "--idle-timeout must be at most 10 years"),
        (["--result-grace", "nan"], {}, None, "--result-grace must be a duration"),
        (["--check-timeout", "0"], {}, None, "--check-timeout must be longer than zero"),
        ([], {}, b'check-timeout = "soon"\n', "check-timeout in {config} must be a duration"),
        (["--max-cost", "1e10"], {}, None, "--max-cost must be at most 1000000000"),
        (["--max-cost", "inf"], {}, None, "--max-cost must be a non-negative number"),
        (["--max-cost", "١"], {}, None, "--max-cost must be a number"),
        (["--max-tokens", "1" + "0" * 13], {}, None, "--max-tokens must be at most 1000000000000"),
        (["--model", "\udcff"], {}, None, "--model is not valid UTF-8 text"),
        ([], {}, b'label = "\xff"\n', "{config}: not valid UTF-8"),
        ([], {}, b"a = " + b"[" * 100_000 + b"]" * 100_000 + b"\n", "{config}: not valid TOML"),
        ([], {}, b"max_tokens = " + b"9" * 5000 + b"\n", "{config}: not valid TOML"),
        ([], {}, b"max_iterations = 2\nmax-iterations = 3\n", "{config}: max_iterations and"),
        ([], {}, b"max_iterations = [1]\n", "{config}: max_iterations must be a string or"),
    ],
    ids=_short_id,
)
def test_a_bad_setting_is_one_line_exit_2_and_creates_nothing(
    tmp_path: Path,
    repo: Path,
    fake_agent: FakeAgent,
    args: list[str],
    env: dict[str, str],
    toml: bytes | None,
    message: str,
) -> None:
    agent_env = fake_agent([[{"result": "COMPLETE"}]])
    if toml is not None:
        (repo / ".autopilot").mkdir()
        (repo / CONFIG).write_bytes(toml)
    before = _files(tmp_path)
    done = run_cli(["run", "-p", "x", *args], cwd=repo, env={**agent_env, **env})
    _assert_one_line_error(done, 2, message.format(config=repo / CONFIG))
    assert _files(tmp_path) == before
    assert not (tmp_path / "runs").exists()


def test_the_same_settings_within_bounds_are_accepted(repo: Path, fake_agent: FakeAgent) -> None:
    (repo / ".autopilot").mkdir()
    (repo / CONFIG).write_text('max_duration = "3650 days"\nmax_cost = 1e9\nmin_iterations = 1\n')
    done = run_cli(
        ["run", "-p", "x", "--max-iterations", "08", "--max-tokens", "1" + "0" * 12],
        cwd=repo,
        env=fake_agent([[{"result": "COMPLETE"}]]),
    )
    assert done.returncode == 0, done.stderr
    assert "iterations 1..8, cost $1e+09, tokens 1000000000000" in done.stdout
    assert "duration 87600h" in done.stdout


def test_parsers_accept_ascii_digits_only() -> None:
    assert parse_int(" 08 ", name="n") == 8
    assert parse_int("0" * 5000 + "7", name="n") == 7
    for text in ("²", "٣", "１", "++5", "+", "_", "", "-1", "1.0", "1e3", "+2", "1_0", "0x10"):
        with pytest.raises(UsageError, match="must be a whole number"):
            parse_int(text, name="n")
    assert parse_float("$1_000.5", name="c") == 1000.5
    assert parse_duration_seconds("1h30m", name="d") == 5400
    assert parse_duration_seconds("3650 days", name="d") == 3650 * 86400
    for bad in ("٣m", "1e999", "9" * 400 + "d"):
        with pytest.raises(UsageError):
            parse_duration_seconds(bad, name="d")


# -- state.json of the wrong shape -----------------------------------------------------


def _finished_run(tmp_path: Path, repo: Path, fake_agent: FakeAgent) -> Path:
    done = run_cli(["run", "-p", "x"], cwd=repo, env=fake_agent([[{"result": "COMPLETE"}]]))
    assert done.returncode == 0, done.stderr
    return next((tmp_path / "runs").glob("repo-*"))


def _as_if_crashed(folder: Path, **changes: Any) -> None:
    """The run's state as a driver that died mid-run leaves it, with ``changes``."""
    state = read_state_json(folder / "state.json")
    state.update(terminated=False, status="running", pid=None, terminationReason=None)
    for key, value in changes.items():
        if isinstance(value, dict) and isinstance(state.get(key), dict):
            state[key].update(value)
        else:
            state[key] = value
    (folder / "state.json").write_text(json.dumps(state, indent=2))


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"spend": "x"}, "spend"),
        ({"iter": "abc"}, "iter"),
        ({"config": [1]}, "config"),
        ({"loop": 3}, "loop"),
        ({"paused": "yes"}, "paused"),
        ({"config": {"completion_match": "sometimes"}}, "config.completion_match"),
        ({"prompt": 5}, "prompt"),
        ({"spend": {"tokens": {"input": "many"}}}, "spend.tokens.input"),
        ({"startedAt": 1e308}, "startedAt"),
    ],
)
def test_a_state_of_the_wrong_shape_is_exit_4_for_every_command(
    tmp_path: Path, repo: Path, fake_agent: FakeAgent, changes: dict[str, Any], field: str
) -> None:
    folder = _finished_run(tmp_path, repo, fake_agent)
    _as_if_crashed(folder, **changes)
    _assert_every_command_refuses(
        tmp_path, repo, folder, f"{folder / 'state.json'}: field '{field}' must"
    )


def _assert_every_command_refuses(tmp_path: Path, repo: Path, folder: Path, says: str) -> None:
    """Each command that reads the run's state exits 4 with one line saying ``says``
    of the corrupt state file, and writes nothing."""
    before = _files(tmp_path)
    for command in (
        ["status"],
        ["status", "--json"],
        ["start", "--plain"],
        ["pause"],
        ["resume"],
        ["stop"],
    ):
        done = run_cli([*command, folder.name], cwd=repo)
        _assert_one_line_error(done, 4, says, "(corrupt state file)")
        if command[0] in ("status", "stop"):
            assert "`autopilot doctor --repair` rebuilds it" in done.stderr, command
        assert _files(tmp_path) == before, command


def test_a_state_nested_hundreds_deep_is_exit_4_for_every_command(
    tmp_path: Path, repo: Path, fake_agent: FakeAgent
) -> None:
    folder = _finished_run(tmp_path, repo, fake_agent)
    nested: dict[str, Any] = {}
    for _ in range(500):
        nested = {"a": nested}
    _as_if_crashed(folder, forged=nested)
    _assert_every_command_refuses(
        tmp_path, repo, folder, f"{folder / 'state.json'} nests deeper than 64 levels"
    )


@pytest.mark.parametrize("changes", [{"spend": "x"}, {"paused": "yes"}, {"loop": 3}])
def test_a_state_broken_under_a_running_driver_is_rewritten_from_memory(
    tmp_path: Path, repo: Path, fake_agent: FakeAgent, changes: dict[str, Any]
) -> None:
    env = fake_agent([[{"sleep": 1.5}, {"result": "working"}], [{"result": "COMPLETE"}]])
    proc = subprocess.Popen(
        [sys.executable, "-m", "autopilot", "run", "-p", "x", "--plain"],
        cwd=repo,
        env=dict(os.environ, **env),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        runs = tmp_path / "runs"
        _wait_for(lambda: runs.exists() and any(runs.glob("repo-*/state.json")))
        path = next(runs.glob("repo-*/state.json"))
        _wait_for(lambda: read_state(path).iteration_open is True)
        # Under the state lock, as another writer would write it.
        lock = FileLock(path.with_name("state.json.lock"), timeout_seconds=30)
        assert lock.acquire()
        try:
            data = read_state_json(path)
            data.update(changes)
            write_atomically(path, encode_state(data))
        finally:
            lock.release()
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, stderr
    assert "Traceback" not in stderr
    assert "completed (completion_promise)" in stdout
    kept = list(path.parent.glob("state.json.corrupt-*"))
    assert len(kept) == 1
    assert json.loads(kept[0].read_text()).items() >= changes.items()
    state = read_state(path)
    assert state.terminated is True and state.spend.iterations == 2


# -- strings that are not UTF-8 ----------------------------------------------------------


def test_lone_surrogates_in_state_json_are_shown_and_written_as_u_fffd(
    tmp_path: Path, repo: Path, fake_agent: FakeAgent
) -> None:
    # A JavaScript agent CLI can cut a string inside a surrogate pair; its JSON
    # escape is valid JSON, but the lone surrogate cannot be printed or encoded.
    folder = _finished_run(tmp_path, repo, fake_agent)
    path = folder / "state.json"
    state = read_state_json(path)
    state.update(terminated=False, status="running", pid=None)
    text = json.dumps(state, indent=2).replace('"sessionId": null', '"sessionId": "\\ud83d"')
    text = text.replace('"model": null', '"model": "m\\udc00"', 1)
    path.write_text(text)
    done = run_cli(["status", folder.name], cwd=repo)
    assert done.returncode == 0, done.stderr
    assert "agent      claude (m\ufffd)" in done.stdout
    done = run_cli(["pause", folder.name], cwd=repo)
    assert done.returncode == 0, done.stderr
    assert not done.stderr
    written = read_state(path)
    assert written.paused is True
    assert (written.session_id, written.model) == ("\ufffd", "m\ufffd")


def test_replay_of_damaged_events_prints_one_line_each(
    tmp_path: Path, repo: Path, fake_agent: FakeAgent
) -> None:
    folder = _finished_run(tmp_path, repo, fake_agent)
    log = folder / "events.jsonl"
    good = len(read_jsonl(log))
    damaged = [
        b'{"type": "warning", "ts": 1e308, "runId": "r", "note": "a \\ud83d b\\nc"}',
        b'{"type": "warning", "ts": -1e308, "runId": "r", "note": [1, {"k": "\\udfff"}]}',
        b'{"type": "warning", "ts": 1, "runId": "r", "odd\\nkey": "\\udc00", "n": 1e999}',
    ]
    with log.open("ab") as handle:
        handle.write(b"\n".join(damaged) + b"\n")
    before = _files(tmp_path)
    done = run_cli(["replay", folder.name], cwd=repo)
    assert done.returncode == 0, done.stderr
    assert not done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == good + len(damaged) + 1  # the events, then the summary
    assert lines[good] == '??:??:??.??? warning note="a \ufffd b c"'
    assert lines[good + 1] == '??:??:??.??? warning note=[1,{"k":"\ufffd"}]'
    assert lines[good + 2].endswith(" warning odd_key=\ufffd n=inf")
    assert _files(tmp_path) == before


# -- errors nobody planned for -----------------------------------------------------------


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_a_full_disk_under_stdout_is_one_line_exit_4(tmp_path: Path, repo: Path) -> None:
    with open("/dev/full", "w") as full:
        done = subprocess.run(
            [sys.executable, "-m", "autopilot", "where"],
            cwd=repo,
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            check=False,
        )
    _assert_one_line_error(done, 4, "autopilot: error: No space left on device")


def _main_exit(args: list[str]) -> int:
    with pytest.raises(SystemExit) as caught:
        cli_main.main(args)
    return int(caught.value.code or 0)


def _raising(error: BaseException) -> Callable[..., Any]:
    def fail(*args: Any, **kwargs: Any) -> Any:
        raise error

    return fail


def test_an_os_error_is_one_line_naming_the_file_exit_4(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    full = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), "/runs/r/state.json")
    monkeypatch.setattr(view_cmds, "runs_root", _raising(full))
    assert _main_exit(["where"]) == 4
    assert capsys.readouterr().err == (
        "autopilot: error: No space left on device: /runs/r/state.json\n"
    )


def test_an_unexpected_error_is_one_line_exit_1_unless_debugging(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(view_cmds, "runs_root", _raising(RuntimeError("boom\non two lines")))
    assert _main_exit(["where"]) == 1
    assert capsys.readouterr().err == (
        "autopilot: internal error: RuntimeError: boom on two lines "
        "(set AUTOPILOT_DEBUG=1 for the traceback)\n"
    )
    monkeypatch.setenv("AUTOPILOT_DEBUG", "1")
    with pytest.raises(RuntimeError, match="boom"):
        cli_main.main(["where"])


def test_an_interrupt_is_exit_130_without_a_traceback(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(view_cmds, "runs_root", _raising(KeyboardInterrupt()))
    assert _main_exit(["where"]) == 130
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.strip() in ("", "autopilot: interrupted")
