"""``Snapshot``: the picture of a run that ``fold`` builds from its log.

Apart from ``fold`` (``store.fold``) so that what only shows a snapshot (``status``,
the live view's panels) does not load the log readers.
"""

from __future__ import annotations

from copy import deepcopy

from msgspec import Struct, field

from autopilot.core.vocabulary import RunStatus, SeedStatus, status_of_seed_fold

TYPE_CHECKING = False  # as typing's, without importing typing at run time
if TYPE_CHECKING:
    from typing import Any

MAX_SNAPSHOT_HISTORY = 256
"""History lists keep the newest 256 entries (seed ``MAX_SNAPSHOT_HISTORY``)."""


class Snapshot(Struct):
    """A run as its event log tells it.

    Seed fields (in the seed's key order) come first; ``tokens`` is the run's
    cumulative ``{"input", "output"}``; timestamps are epoch ms. autopilot's own
    fields follow: ``costUsd`` (cumulative USD), ``agent``, ``model``,
    ``waitingUntil`` (epoch ms while rate limited), ``note`` (the terminal note),
    ``outcomes`` (iteration number → outcome string, newest 256), ``workItems``
    (the backlog's items, ``{id, title, status, attempt}`` in file order, from
    ``workitem_recorded``, ``workitem_start``/``workitem_end`` with an ``itemId`` and
    ``backlog_snapshot.items``), and the spent ``iterationsSpent`` and ``activeMs``
    (cumulative, from ``iteration_end``; a log without them counts each
    ``iteration_end`` that was not a retried attempt), and ``lastRestore`` (the
    newest ``restored`` event: ``{checkpoint, sha, safetyCheckpoint, filesChanged,
    ts}``).
    """

    runId: str | None = None  # noqa: N815 - the seed's JSON field names
    label: str | None = None
    status: str = SeedStatus.IDLE
    iteration: int | float = 0
    maxIterations: Any = None  # noqa: N815
    minIterations: Any = None  # noqa: N815
    stagnationStreak: int | float = 0  # noqa: N815
    reason: Any = None
    tokens: dict[str, Any] = field(default_factory=lambda: {"input": 0, "output": 0})
    premiumRequests: Any = None  # noqa: N815
    lastExcerpt: str | None = None  # noqa: N815
    startedAt: int | float | None = None  # noqa: N815
    updatedAt: int | float | None = None  # noqa: N815
    terminalAt: int | float | None = None  # noqa: N815
    sessionId: str | None = None  # noqa: N815
    iterations: list[dict[str, Any]] = field(default_factory=list)
    activeStage: dict[str, Any] | None = None  # noqa: N815
    recentStages: list[dict[str, Any]] = field(default_factory=list)  # noqa: N815
    currentStageSubstages: list[dict[str, Any]] = field(default_factory=list)  # noqa: N815
    backlog: dict[str, Any] | None = None
    activeWorkItem: dict[str, Any] | None = None  # noqa: N815
    completedWorkItems: list[dict[str, Any]] = field(default_factory=list)  # noqa: N815
    closedByLoop: int | float = 0  # noqa: N815
    currentPlan: dict[str, Any] | None = None  # noqa: N815
    planAmendments: list[dict[str, Any]] = field(default_factory=list)  # noqa: N815
    currentTaskList: dict[str, Any] | None = None  # noqa: N815
    taskInFlight: dict[str, Any] | None = None  # noqa: N815
    recentTasks: list[dict[str, Any]] = field(default_factory=list)  # noqa: N815
    lastCommit: dict[str, Any] | None = None  # noqa: N815
    activeWorktree: dict[str, Any] | None = None  # noqa: N815
    keptWorktrees: list[dict[str, Any]] = field(default_factory=list)  # noqa: N815
    keptWorktreeCount: int = 0  # noqa: N815
    currentStageSubstagesDropped: int = 0  # noqa: N815
    # autopilot's own fields.
    costUsd: float = 0.0  # noqa: N815
    agent: str | None = None
    model: str | None = None
    waitingUntil: int | float | None = None  # noqa: N815
    note: str | None = None
    outcomes: dict[str, str] = field(default_factory=dict)
    workItems: list[dict[str, Any]] = field(default_factory=list)  # noqa: N815
    iterationsSpent: int = 0  # noqa: N815
    activeMs: int | float = 0  # noqa: N815
    lastRestore: dict[str, Any] | None = None  # noqa: N815

    @property
    def terminal(self) -> bool:
        """True once a ``complete`` or ``abort`` event has been folded."""
        return self.status in (SeedStatus.COMPLETE, SeedStatus.ABORTED)

    @property
    def run_status(self) -> RunStatus:
        """The run's status as ``state.json``, ``status`` and ``list`` speak it."""
        return status_of_seed_fold(self.status)

    def to_dict(self) -> dict[str, Any]:
        """The snapshot as plain JSON-able data."""
        return {name: deepcopy(getattr(self, name)) for name in self.__struct_fields__}

    def seed_fields(self) -> dict[str, Any]:
        """Only the fields the seed system's reader has, in its key order."""
        names = self.__struct_fields__[:_SEED_FIELD_COUNT]
        return {name: deepcopy(getattr(self, name)) for name in names}


_SEED_FIELD_COUNT = 33
