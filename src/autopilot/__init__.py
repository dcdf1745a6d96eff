"""autopilot: run coding agents unattended.

A loop driver for agent CLIs (Claude Code, any command, …) with durable state, an
append-only event log, honest completion and stagnation handling, and control from
any terminal. See ``docs/architecture.md`` for the layout.
"""

__version__ = "0.1.0"
