"""The pure core: decisions and vocabularies that import nothing else from autopilot.

Nothing here reads a clock, a file or a process; callers pass everything in.
"""
