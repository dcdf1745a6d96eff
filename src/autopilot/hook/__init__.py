"""Stop-hook mode: autopilot as a Claude Code or Codex Stop hook (docs/hooks.md).

``store.hook_armed`` and ``launch`` answer "is anything armed?" with the standard
library alone, because the hook runs on every stop of every session in a project where
it is installed; the rest is imported only when a run is armed. The registry of armed
runs is ``store.hook_registry``.
"""
