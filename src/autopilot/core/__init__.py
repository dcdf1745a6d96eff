"""The pure core: decisions and vocabularies that import nothing else from autopilot.

Nothing here reads a clock, a file or a process; callers pass everything in. Every
host — the foreground driver, and later a daemon, a Stop hook or a workflow engine —
calls the same functions with the same inputs and gets the same answer
(``step.conclude`` after each iteration).
"""
