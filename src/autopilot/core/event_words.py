"""The event log's types (``EventType``): part of ``core.vocabulary`` (which re-exports
it), in a module of its own so that a reader of the log (``store.event_format``;
``status`` of a live run) builds this one enum and not all of its.
"""

from __future__ import annotations

from enum import StrEnum


class EventType(StrEnum):
    """Every event type autopilot writes; the value is the JSON ``type``.

    Order matters and only grows (the Node tool's log is "strictly additive").
    The first 25 are the seed system's own ``EVENT_TYPES``.
    """

    ARMED = "armed"
    ITERATION_START = "iteration_start"
    ITERATION_END = "iteration_end"
    PAUSE = "pause"
    RESUME = "resume"
    STAGNATION = "stagnation"
    COMPLETE = "complete"
    ABORT = "abort"
    STAGE_START = "stage_start"
    STAGE_END = "stage_end"
    SUBSTAGE = "substage"
    BACKLOG_SNAPSHOT = "backlog_snapshot"
    WORKITEM_START = "workitem_start"
    WORKITEM_END = "workitem_end"
    STAGE_PLAN = "stage_plan"
    STAGE_PLAN_AMEND = "stage_plan_amend"
    TASK_LIST = "task_list"
    TASK_START = "task_start"
    TASK_END = "task_end"
    COMMIT_OBSERVED = "commit_observed"
    USAGE_UPDATE = "usage_update"
    SESSION_ATTACHED = "session_attached"
    WORKTREE_CREATED = "worktree_created"
    WORKTREE_REMOVED = "worktree_removed"
    WORKTREE_KEPT = "worktree_kept"
    # autopilot's own, appended from here on.
    MESSAGE_QUEUED = "message_queued"
    MESSAGE_DELIVERED = "message_delivered"
    RATE_LIMITED = "rate_limited"
    CHECKPOINT = "checkpoint"
    DECISION_APPLIED = "decision_applied"
    SUPERVISOR_RESTART = "supervisor_restart"
    SUPERVISOR_GIVEUP = "supervisor_giveup"
    GATE = "gate"
    AGENT_ERROR = "agent_error"
    DRIVER_START = "driver_start"
    WARNING = "warning"
    WORKITEM_RECORDED = "workitem_recorded"
    MEMORY_RESTORED = "memory_restored"
    PERMISSION_DENIED = "permission_denied"
    HEAD_MOVED = "head_moved"
    SURFACE_VIOLATION = "surface_violation"
    VERIFY = "verify"
    BUDGET_EXTENDED = "budget_extended"
    HOOK_SESSION = "hook_session"
    RESTORED = "restored"
    LANE = "lane"
    LANE_MERGED = "lane_merged"
    MERGE_CONFLICT = "merge_conflict"
    BACKLOG_VERIFIED = "backlog_verified"
    WORKITEM_MARK = "workitem_mark"
