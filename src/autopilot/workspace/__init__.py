"""The workspace: the git repository a run works in.

``repo`` runs git (hardened: no hooks, no fsmonitor, no optional locks, a timeout),
``checkpoints`` snapshots the working tree under ``refs/autopilot/<runId>/`` and
restores it, ``worktrees`` gives a run its own worktree and branch, ``merge`` brings
that branch back into the user's checkout only when it applies cleanly.
"""
