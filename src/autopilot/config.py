"""One run configuration: ``RunConfig``, what a run is armed with, and its JSON form
in ``state.json`` (every value checked again as it is read back).

Where each setting comes from (flag, environment, config files, defaults) is
``config_sources``'; each value's parser and bounds are ``config_values``'.
"""

from __future__ import annotations

from msgspec import Struct, field

from autopilot.config_json import CONFIG_FIELDS, check_config_json
from autopilot.core.vocabulary import DEFAULT_EXTENSION, DEFAULT_MAX_TOTAL, MatchMode

TYPE_CHECKING = False  # as typing's, without importing typing at run time
if TYPE_CHECKING:  # the decision policy loads only where a run decides
    from typing import Any

    from autopilot.core.policy import PolicyConfig


DEFAULT_MAX_ITERATIONS = 10
"""Iteration budget when none is given; unlimited needs ``--max-iterations 0``."""


class RunConfig(Struct, frozen=True):
    """Everything a run is armed with; stored in ``state.json`` for restarts.

    Durations are seconds; ``None`` limits are off; ``check_timeout_seconds`` bounds
    each check command (a work item's criterion, ``--verify``). ``checkpoints`` is ``on`` or
    ``off`` (``--no-checkpoints``). ``max_iterations`` 0 means
    unlimited, which must be asked for explicitly.
    """

    agent: str = "claude"
    model: str | None = None
    label: str | None = None
    max_iterations: int = DEFAULT_MAX_ITERATIONS
    min_iterations: int = 1
    max_cost_usd: float | None = None
    max_tokens: int | None = None
    max_duration_seconds: float | None = None
    iteration_timeout_seconds: float | None = 30 * 60
    idle_timeout_seconds: float | None = 10 * 60
    result_grace_seconds: float = 5.0
    check_timeout_seconds: float = 10 * 60
    max_item_attempts: int = 3
    completion_promise: str = "COMPLETE"
    abort_promise: str | None = None
    completion_match: str = MatchMode.SENTENCE.value
    stagnation_limit: int = 3
    context: str = "fresh"
    prompt_via: str = "stdin"
    env_exclude: tuple[str, ...] = ()
    notify: tuple[str, ...] = ()
    checkpoints: str = "on"
    verify: tuple[str, ...] = ()
    adaptive_extension: int = DEFAULT_EXTENSION
    adaptive_max_total: int = DEFAULT_MAX_TOTAL
    sources: dict[str, str] = field(default_factory=dict)

    def __eq__(self, other: object) -> bool:
        """The same settings; where each came from (``sources``) is not compared."""
        if type(other) is not RunConfig:
            return NotImplemented
        return self._compared() == other._compared()

    def __hash__(self) -> int:
        return hash(self._compared())

    def _compared(self) -> tuple[object, ...]:
        return tuple(getattr(self, name) for name in CONFIG_FIELDS)

    def policy(self, mode: str = "prompt") -> PolicyConfig:
        """The limits and promises as the decision policy takes them for a run of
        ``mode`` (a ``backlog`` run has its own evidence gate and no verify commands;
        only a ``self-improve`` run extends its iteration budget)."""
        from autopilot.core.policy import PolicyConfig

        return PolicyConfig(
            completion_promise=self.completion_promise,
            abort_promise=self.abort_promise,
            match_mode=MatchMode(self.completion_match),
            min_iterations=self.min_iterations,
            max_iterations=self.max_iterations or None,
            stagnation_limit=self.stagnation_limit,
            max_cost_usd=self.max_cost_usd,
            max_tokens=self.max_tokens,
            max_duration_ms=(
                int(self.max_duration_seconds * 1000) if self.max_duration_seconds else None
            ),
            verify=bool(self.verify) and mode != "backlog",
            adaptive_extension=self.adaptive_extension if mode == "self-improve" else 0,
            adaptive_max_total=self.adaptive_max_total,
            backlog=mode == "backlog",
        )

    def to_json(self) -> dict[str, Any]:
        """The settings as a JSON object (``sources`` left out)."""
        values = {name: getattr(self, name) for name in CONFIG_FIELDS}
        values["env_exclude"] = list(self.env_exclude)
        values["notify"] = list(self.notify)
        values["verify"] = list(self.verify)
        return values

    @classmethod
    def from_json(cls, data: Any, *, source: str = "state.json") -> RunConfig:
        """Rebuild from ``to_json`` output; unknown keys are ignored, missing ones default.

        Every value is checked as ``build_config`` checks it (type, range, choice), so
        a hand-edited or corrupt ``state.json`` cannot arm a run with a value that
        fails later.

        Args:
            data: The ``config`` object of a ``state.json``.
            source: Where ``data`` came from (a file path), for the message.

        Raises:
            StateFileError: ``data`` is not an object, or a value has the wrong type
                or is out of range, e.g. ``state.json: field 'config.completion_match'
                must be one of word, tag, substring; got 'x' (corrupt state file)``.
        """
        return cls(**check_config_json(data, source=source))
