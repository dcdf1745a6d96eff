"""autopilot's folders by the XDG rule, without platformdirs where the rule is simple.

``platformdirs.user_state_path("autopilot")`` is, on Linux and the other XDG
systems, ``$XDG_STATE_HOME/autopilot`` or ``~/.local/state/autopilot``, and
``user_config_path`` is ``$XDG_CONFIG_HOME/autopilot`` or ``~/.config/autopilot``
(a variable that is not an absolute path counts as unset, as the XDG Base Directory
Specification says: https://specifications.freedesktop.org/basedir-spec/latest/);
importing platformdirs costs more than the rest of ``autopilot status``, and memory in
every driver. Standard library only
(the Stop hook's answer with nothing armed uses it too, ``store.hook_armed``).
"""

from __future__ import annotations

import os
import sys


def _xdg_home(variable: str, *default: str) -> str | None:
    if sys.platform == "darwin" or sys.platform.startswith(("win", "cygwin")):
        return None
    home = os.environ.get(variable, "")
    if os.path.isabs(home):
        return home
    return os.path.join(os.path.expanduser("~"), *default)


def xdg_runs_root() -> str | None:
    """``<state home>/autopilot/runs`` by the XDG rule, or None on a platform whose
    rule needs platformdirs (macOS, Windows)."""
    home = _xdg_home("XDG_STATE_HOME", ".local", "state")
    return None if home is None else os.path.join(home, "autopilot", "runs")


def xdg_config_file() -> str | None:
    """``<config home>/autopilot/config.toml`` by the XDG rule, or None on a platform
    whose rule needs platformdirs (macOS, Windows)."""
    home = _xdg_home("XDG_CONFIG_HOME", ".config")
    return None if home is None else os.path.join(home, "autopilot", "config.toml")
