"""The words of a run's ``state.json`` the control commands read: its status, its
mode, the Node implementation's reasons, and the promise match modes its ``config``
holds. Part of ``core.vocabulary`` (which re-exports them), in a module of its own so
that ``pause``, ``resume`` and ``stop`` build these few enums and not all of its
(``cli.control_light``).
"""

from __future__ import annotations

from enum import StrEnum


class RunStatus(StrEnum):
    """A run's ``status`` in ``state.json`` (``docs/formats.md``).

    The one status vocabulary of a run: ``state.json``, ``list``, ``status`` and
    ``watch`` all speak it; the seed log reader's own five statuses (``idle``,
    ``running``, ``paused``, ``complete``, ``aborted``) map onto it
    (``status_of_seed_fold``).
    """

    RUNNING = "running"
    PLANNING = "planning"
    WAITING = "waiting"
    RATE_LIMITED = "rate_limited"
    PAUSED = "paused"
    GATED = "gated"
    AWAITING_USER = "awaiting_user"
    IDLE = "idle"
    COMPLETED = "completed"
    STOPPED = "stopped"
    ERROR = "error"


TERMINAL_STATUSES = frozenset({RunStatus.COMPLETED, RunStatus.STOPPED, RunStatus.ERROR})
"""Statuses of a run that has ended."""

HOOK_MODE = "hook"
"""The ``mode`` of a run armed with ``autopilot arm`` (each Stop of its session an iteration)."""

PARALLEL_MODE = "parallel"
"""A parallel backlog run: its lanes are the runs with daemons (relaunched one by one)."""


NODE_COMPLETE_REASON = "complete"
"""The terminal reason the Node implementation of the tool family writes for a run
that completed (its ``terminationReason`` and the ``complete`` event's ``reason``)."""

NODE_FAILED_REASONS = frozenset({"error", "subprocess_failed"})
"""Terminal reasons of the Node implementation that mean the agent failed."""


class MatchMode(StrEnum):
    """How strictly a promise token must stand in the final message
    (``core.completion``)."""

    SENTENCE = "sentence"
    WORD = "word"
    TAG = "tag"
    SUBSTRING = "substring"
