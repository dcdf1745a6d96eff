"""``--verify``: a completion promise counts only once the verify commands pass (pure).

A prompt run armed with verify commands (``--verify CMD``, repeatable, or
``verify = [...]`` in ``config.toml``) does not take the agent's word that it is done:
when ``conclude`` would complete the run on the completion promise, the driver runs
every verify command in the work tree (``loop.verify``) and concludes again with what
they found. All exit 0: the run completes. Any other result, or no result at all (a
driver that died before running them): the run goes on, a ``warning`` says why, and
the next prompt carries the failing commands' output.

A backlog run has its own gate (each criterion's ``check``) and ignores verify.
"""

from __future__ import annotations

from autopilot.core.attempt import Attempt, Verification
from autopilot.core.policy import Decision, PolicyConfig
from autopilot.core.structs import replace
from autopilot.core.vocabulary import Action, Reason


def awaits_verification(decision: Decision, config: PolicyConfig) -> bool:
    """True if ``decision`` completes the run on the promise and the run has verify
    commands: the driver must run them and conclude again."""
    return (
        config.verify
        and decision.action is Action.COMPLETE
        and decision.reason == Reason.COMPLETION_PROMISE
    )


def verify_notice(verification: Verification) -> str:
    """The next prompt's notice after verify commands refused a completion promise."""
    return (
        "You gave the completion promise, but autopilot ran the run's verify commands in "
        "the work tree and they did not all pass, so the run goes on:\n\n"
        f"{verification.failure or '; '.join(verification.failing)}\n\n"
        "Fix what they report; give the completion promise again only once they pass."
    )


def verify_rule(decision: Decision, attempt: Attempt, config: PolicyConfig) -> Decision:
    """Hold a completion promise to the verify commands' result.

    Returns:
        ``decision`` unchanged when it does not await verification or every verify
        command passed; else ``CONTINUE`` with a warning naming what failed (or that
        the commands did not run).
    """
    if not awaits_verification(decision, config):
        return decision
    verification = attempt.verification
    if verification is not None and verification.passed:
        return decision
    if verification is None:
        why = "the verify commands did not run"
    else:
        why = "; ".join(verification.failing) or "a verify command failed"
    return replace(
        decision,
        action=Action.CONTINUE,
        reason=None,
        note=None,
        warning=f"completion promise refused: {why}; the run goes on",
    )
