"""autopilot's own XDG lookup gives the folders platformdirs gives, on the same
environment."""

from __future__ import annotations

import sys
from pathlib import Path

import platformdirs
import pytest

from autopilot.store.xdg import xdg_config_file, xdg_runs_root

pytestmark = pytest.mark.skipif(
    sys.platform == "darwin" or sys.platform.startswith(("win", "cygwin")),
    reason="platformdirs' own rule applies here",
)


@pytest.mark.parametrize(
    "value", [None, "", "   ", "{tmp}/xdg", "relative/xdg", "~/xdg", "{tmp}/with space/"]
)
def test_the_folders_are_platformdirs_own(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, value: str | None
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    for variable in ("XDG_STATE_HOME", "XDG_CONFIG_HOME"):
        if value is None:
            monkeypatch.delenv(variable, raising=False)
        else:
            monkeypatch.setenv(variable, value.format(tmp=tmp_path))
    state = platformdirs.user_state_path("autopilot")
    config = platformdirs.user_config_path("autopilot")
    assert xdg_runs_root() == str(state / "runs")
    assert xdg_config_file() == str(config / "config.toml")
