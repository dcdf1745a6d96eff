"""The default runs root without platformdirs where the rule is simple.

``platformdirs.user_state_path("autopilot")`` is, on Linux and the other XDG
systems, ``$XDG_STATE_HOME/autopilot`` or ``~/.local/state/autopilot``; importing
platformdirs costs more than the rest of ``autopilot status``. Standard library only
(the Stop hook's answer with nothing armed uses it too, ``hook.armed``).
"""

from __future__ import annotations

import os
import sys


def xdg_runs_root() -> str | None:
    """``<state home>/autopilot/runs`` by the XDG rule, or None on a platform whose
    rule needs platformdirs (macOS, Windows)."""
    if sys.platform == "darwin" or sys.platform.startswith(("win", "cygwin")):
        return None
    state_home = os.environ.get("XDG_STATE_HOME", "").strip()
    if not state_home:
        state_home = os.path.join(os.path.expanduser("~"), ".local", "state")
    return os.path.join(state_home, "autopilot", "runs")
