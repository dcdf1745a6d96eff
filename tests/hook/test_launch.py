"""The Stop hook's entry: nothing armed is answered before the command line loads."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from autopilot.core.vocabulary import HookAgent
from autopilot.hook.stop import answer_stop
from autopilot.store.hook_armed import anything_armed, runs_root_quick
from autopilot.store.hook_registry import Arming, entry_path, load_armings, locked, write_arming
from autopilot.store.paths import runs_root
from tests.fakes import FakeClock

DATA = Path(__file__).resolve().parents[1] / "data" / "hook"
INPUT = (DATA / "claude-2.1.197-stop-input-1.json").read_bytes()
PROBE = """
import sys
sys.argv = ["autopilot", *sys.argv[1:]]
from autopilot.launch import main
try:
    main()
except SystemExit as done:
    print(json.dumps([done.code, sorted(m for m in ("click", "platformdirs", "autopilot.cli.main", "dataclasses") if m in sys.modules)]), file=sys.stderr)
"""


def _probe(args: list[str], stdin: bytes, cwd: Path) -> tuple[bytes, list[object]]:
    done = subprocess.run(
        [sys.executable, "-c", "import json\n" + PROBE, *args],
        input=stdin,
        capture_output=True,
        cwd=cwd,
        check=False,
    )
    return done.stdout, json.loads(done.stderr.decode().splitlines()[-1])


@pytest.mark.parametrize("agent", ["claude", "codex"])
def test_nothing_armed_answers_with_nothing_and_imports_no_command_line(
    tmp_path: Path, agent: str
) -> None:
    stdout, (code, loaded) = _probe(["hook", f"{agent}-stop"], INPUT, tmp_path)
    assert (stdout, code, loaded) == (b"", 0, [])


def test_an_argument_more_is_a_usage_error(tmp_path: Path) -> None:
    _stdout, (code, loaded) = _probe(["hook", "claude-stop", "--x"], INPUT, tmp_path)
    assert code == 2 and "autopilot.cli.main" in loaded


def test_an_empty_registry_folder_is_nothing_armed(tmp_path: Path) -> None:
    root = runs_root()
    (root / "hooks").mkdir()
    (root / "hooks" / ".lock").write_text("")
    assert not anything_armed(str(root))
    write_arming(root, Arming("r-1800000000000", HookAgent.CLAUDE, str(tmp_path)))
    assert anything_armed(str(root))


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"AUTOPILOT_RUNS_DIR": "/abs/runs"}, "/abs/runs"),
        ({"AUTOPILOT_RUNS_DIR": "rel/runs"}, "{cwd}/rel/runs"),
        ({"XDG_STATE_HOME": "/xdg/state"}, "/xdg/state/autopilot/runs"),
        ({"HOME": "/home/u"}, "/home/u/.local/state/autopilot/runs"),
    ],
)
def test_the_quick_runs_root_is_the_stores(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, env: dict[str, str], expected: str
) -> None:
    if sys.platform == "darwin":
        pytest.skip("macOS asks platformdirs")
    monkeypatch.chdir(tmp_path)
    for key in ("AUTOPILOT_RUNS_DIR", "XDG_STATE_HOME"):
        monkeypatch.delenv(key, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    quick = runs_root_quick()
    assert quick == expected.format(cwd=tmp_path)
    assert Path(quick) == runs_root(create=False)


def test_another_sessions_run_lets_the_stop_through(tmp_path: Path) -> None:
    root = runs_root()
    with locked(root):
        write_arming(
            root,
            Arming("r-1800000000000", HookAgent.CLAUDE, "/home/dev/work", session_id="other"),
        )
    assert answer_stop(HookAgent.CLAUDE, INPUT, clock=FakeClock()) == ""


def test_a_corrupt_registry_entry_is_reported_and_kept(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = runs_root()
    path = entry_path(root, "r-1800000000000")
    path.parent.mkdir(parents=True)
    path.write_text("{torn")
    assert answer_stop(HookAgent.CLAUDE, INPUT, clock=FakeClock()) == ""
    err = capsys.readouterr().err
    assert err.startswith("autopilot: ") and "cannot be read" in err
    assert len(err.splitlines()) == 1
    assert path.read_text() == "{torn"
    assert load_armings(root) == ([], [f"{path} cannot be read as an armed run; left as it is"])


def test_input_that_is_not_json_lets_the_stop_through(capsys: pytest.CaptureFixture[str]) -> None:
    assert answer_stop(HookAgent.CODEX, b"\x00garbage", clock=FakeClock()) == ""
    assert "not JSON" in capsys.readouterr().err
