"""Stop-hook mode: autopilot as a Claude Code or Codex Stop hook (docs/hooks.md).

``armed`` and ``launch`` answer "is anything armed?" with the standard library
alone, because the hook runs on every stop of every session in a project where it
is installed; the rest is imported only when a run is armed.
"""
