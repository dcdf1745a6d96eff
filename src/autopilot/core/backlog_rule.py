"""How a backlog run's work items bear on the decision after an iteration (pure)."""

from __future__ import annotations

from autopilot.core.attempt import Attempt
from autopilot.core.policy import Decision, PolicyConfig
from autopilot.core.structs import replace
from autopilot.core.vocabulary import Action, Reason


def backlog_rule(decision: Decision, attempt: Attempt, config: PolicyConfig) -> Decision:
    """A backlog run ends on its work items, not on the agent's word.

    ``backlog_done`` when no item is open (also on the last allowed iteration, and
    whatever else was decided), ``user_stopped`` when the agent reported ``stop``; a
    completion promise alone never ends it (the run goes on, with a warning) — nor
    does one from an attempt whose work item was not concluded (``attempt.backlog``
    None in a backlog run, e.g. an attempt cut short by a crash that recovery could
    not tie to its item). Other decisions stand. A prompt run is not touched.
    """
    facts = attempt.backlog
    if facts is None:
        if config.backlog and decision.action is Action.COMPLETE:
            return _promise_ignored(decision, "no work item was concluded by this attempt")
        return decision
    if facts.done:
        return replace(
            decision,
            action=Action.COMPLETE,
            reason=Reason.BACKLOG_DONE,
            note=f"every work item is done ({facts.item_id} last)",
        )
    if facts.stop and decision.action is not Action.ABORT:
        return replace(
            decision,
            action=Action.ABORT,
            reason=Reason.USER_STOPPED,
            note=f"the agent reported stop for work item {facts.item_id}",
        )
    if decision.action is Action.COMPLETE:
        return _promise_ignored(decision, f"{facts.open_items} work items are open")
    return decision


def _promise_ignored(decision: Decision, why: str) -> Decision:
    return replace(
        decision,
        action=Action.CONTINUE,
        reason=None,
        note=None,
        warning=f"a completion promise does not end a backlog run: {why}",
    )
