"""The registry of armed hook runs: ``<runs-root>/hooks/<runId>.json``, one file per run.

Standard library only, and nothing beyond ``os`` and ``sys`` on the path that finds
the registry empty: every stop of every session in a project with the hook installed
asks it (docs/hooks.md, "Answer time"). A run leaves the registry when it ends.
"""

from __future__ import annotations

import os

from autopilot.store.xdg import xdg_runs_root

HOOKS_DIR_NAME = "hooks"
ENTRY_SUFFIX = ".json"
RUNS_DIR_ENV = "AUTOPILOT_RUNS_DIR"


def runs_root_quick() -> str | None:
    """The runs root as ``store.paths.runs_root`` finds it, without importing
    platformdirs where the rule is simple (Linux and other XDG systems).

    Returns:
        The path (not checked, not created), or None on a platform whose rule needs
        platformdirs (macOS, Windows): the caller then asks ``store.paths``.
    """
    configured = os.environ.get(RUNS_DIR_ENV, "").strip()
    if configured:
        root = os.path.expanduser(configured)
        return root if os.path.isabs(root) else os.path.join(os.getcwd(), root)
    return xdg_runs_root()


def hooks_dir(runs_root: str) -> str:
    """``<runs-root>/hooks``, where armed runs are registered."""
    return os.path.join(runs_root, HOOKS_DIR_NAME)


def anything_armed(runs_root: str) -> bool:
    """True if the registry holds at least one entry (a missing folder holds none)."""
    try:
        with os.scandir(hooks_dir(runs_root)) as entries:
            return any(
                entry.name.endswith(ENTRY_SUFFIX) and not entry.name.startswith(".")
                for entry in entries
            )
    except OSError:
        return False
