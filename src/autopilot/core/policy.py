"""What happens after an iteration: a pure function of (counters, facts, config, now).

The order matters (``docs/architecture.md``, "The flow of one iteration"):

1. stop or pause requested (flag in ``state.json``, a signal, the ``OFF`` file);
2. the completion promise in the root agent's final message (after
   ``min_iterations``; on the last allowed iteration it is still completion);
3. the abort promise (same rules);
4. usage limits (wait and retry the same iteration) and the breaker for identical
   immediate failures (back off, then halt with the agent's own error text);
5. stagnation (overrides ``min_iterations``; warns one iteration before it halts);
6. budgets: iterations, cost, tokens, duration (paused and waiting time excluded);
7. (adaptive extension: ``--self-improve`` only, not yet built);
8. otherwise continue.

Nothing here reads a clock, a file or a process; the driver passes everything in.
"""

from __future__ import annotations

from msgspec import Struct

from autopilot.core.completion import explicit_not_done, promise_present
from autopilot.core.vocabulary import Action, MatchMode, Outcome, Progress, Reason

FAILED_OUTCOMES = frozenset({Outcome.AGENT_ERROR, Outcome.LAUNCH_FAILED})


class PolicyConfig(Struct, frozen=True):
    """The limits and promises a run was armed with.

    Attributes:
        completion_promise: Token that completes the run (None: never by promise).
        abort_promise: Token that aborts the run (None: none).
        match_mode: How a token must stand (see ``completion``).
        min_iterations: Promises are not honoured before this many iterations.
        max_iterations: Iteration budget; None means unlimited (asked for
            explicitly with ``--max-iterations 0``).
        stagnation_limit: N stagnant iterations in a row halt the run; 0 disables.
        max_cost_usd: Cost budget in USD, or None.
        max_tokens: Token budget (input + output), or None.
        max_duration_ms: Active wall-time budget in ms, or None.
        breaker_threshold: Identical immediate failures in a row that halt the run.
        immediate_failure_ms: A failure faster than this is "immediate".
        backoff_base_ms: First backoff after a failure; doubles each time.
        backoff_max_ms: Backoff cap.
        verify: The completion promise counts only once the run's verify commands
            pass (``core.verification``).
        adaptive_extension: Iterations granted at a time when the iteration budget
            is reached with work in flight (``core.adaptive``; 0: never).
        adaptive_max_total: The iteration budget is never extended above this.
        backlog: A backlog run: it ends on its work items, never on a completion
            promise (``core.backlog_rule``).
    """

    completion_promise: str | None = "COMPLETE"
    abort_promise: str | None = None
    match_mode: MatchMode = MatchMode.SENTENCE
    min_iterations: int = 1
    max_iterations: int | None = 10
    stagnation_limit: int = 3
    max_cost_usd: float | None = None
    max_tokens: int | None = None
    max_duration_ms: int | None = None
    breaker_threshold: int = 3
    immediate_failure_ms: int = 60_000
    backoff_base_ms: int = 2_000
    backoff_max_ms: int = 300_000
    verify: bool = False
    adaptive_extension: int = 0
    adaptive_max_total: int = 50
    backlog: bool = False


class IterationFacts(Struct, frozen=True):
    """What the driver observed about the iteration that just ended.

    Attributes:
        number: The iteration's 1-based number.
        outcome: How it ended.
        final_message: The root agent's final message (None if it gave none).
        response_digest: Digest of the root response text, for byte-identity.
        tool_calls: Tool calls seen (None: the agent's output cannot show them).
        progress: Git/work-item progress.
        prompt: The prompt sent (a promise echoed from it never counts).
        error_signature: Identifies a failure for the breaker (None if it succeeded).
        error_text: The agent's own error text.
        duration_ms: How long the iteration took.
        reset_at_ms: When a usage limit resets (epoch ms), if known.
        fatal: The agent's own error says retrying cannot help (e.g. its login
            was refused): the run halts at once with that error.
        cut_short: A crash of autopilot's own process cut the iteration short
            (``core.outcome.cut_short``): unless it made progress, the stagnation
            streak, the last response and the failure breaker stay as they were.
    """

    number: int
    outcome: Outcome
    final_message: str | None
    response_digest: str | None
    tool_calls: int | None
    progress: Progress
    prompt: str = ""
    error_signature: str | None = None
    error_text: str | None = None
    duration_ms: int = 0
    reset_at_ms: int | None = None
    fatal: bool = False
    cut_short: bool = False


class Counters(Struct, frozen=True):
    """The run's running totals before this decision (from ``state.json``).

    Attributes:
        iterations_done: Iterations spent, this one included.
        stagnation_streak: Stagnant iterations in a row before this one.
        last_response_digest: The previous iteration's response digest.
        failure_streak: Identical immediate failures in a row before this one.
        last_failure_signature: The previous failure's signature.
        rate_limit_waits: Consecutive usage-limit waits before this one.
        cost_usd: Spend so far, USD.
        tokens: Tokens so far (input + output).
        active_ms: Wall time so far, paused and waiting time excluded.
        stop_requested: A stop is pending.
        pause_requested: A pause is pending.
    """

    iterations_done: int
    stagnation_streak: int = 0
    last_response_digest: str | None = None
    failure_streak: int = 0
    last_failure_signature: str | None = None
    rate_limit_waits: int = 0
    cost_usd: float = 0.0
    tokens: int = 0
    active_ms: int = 0
    stop_requested: bool = False
    pause_requested: bool = False


class Decision(Struct, frozen=True):
    """The driver's next step, and the counters to store with it.

    Attributes:
        action: What to do.
        reason: The terminal reason (``COMPLETE``/``ABORT``) or why it waits.
        note: A human line for the log (the agent's error, the limit reached).
        stagnation_streak: The new streak.
        failure_streak: The new breaker count.
        wait_until_ms: For ``WAIT``/``BACKOFF``: when to go on (epoch ms).
        warning: A warning to log (stagnation about to halt the run).
        spends_iteration: False when the iteration is retried (usage limit).
        response_digest: The response digest to compare the next iteration's with:
            None after an iteration that made progress, so a stagnant streak never
            counts it; unchanged by a usage-limit wait.
    """

    action: Action
    reason: str | None = None
    note: str | None = None
    stagnation_streak: int = 0
    failure_streak: int = 0
    wait_until_ms: int | None = None
    warning: str | None = None
    spends_iteration: bool = True
    response_digest: str | None = None


def is_stagnant(facts: IterationFacts, last_digest: str | None) -> bool:
    """An iteration that made no progress and either repeated its previous response
    byte for byte or made no tool call at all. Outside a git repository
    progress is unknown, and only a repeated response counts."""
    if facts.outcome is Outcome.RATE_LIMITED or facts.progress is Progress.MADE:
        return False
    repeated = facts.response_digest is not None and facts.response_digest == last_digest
    if facts.progress is Progress.UNKNOWN:
        return repeated
    return repeated or facts.tool_calls == 0


def stagnation_streak(counters: Counters, facts: IterationFacts, limit: int) -> int:
    """Stagnant iterations in a row, this one included; 0 when stagnation is off.

    N byte-identical responses in a row are a streak of N: the first of
    them counts once the second repeats it, so with N = 3 the third halts the run.
    """
    if limit <= 0 or not is_stagnant(facts, counters.last_response_digest):
        return 0
    last = counters.last_response_digest
    repeated = facts.response_digest is not None and facts.response_digest == last
    return max(counters.stagnation_streak, 1) + 1 if repeated else counters.stagnation_streak + 1


def decide(
    counters: Counters, facts: IterationFacts, config: PolicyConfig, now_ms: int
) -> Decision:
    """Decide what follows the iteration described by ``facts``.

    Args:
        counters: Totals before this decision, with this iteration already spent
            (``iterations_done`` includes it; cost and tokens include its spend).
        facts: What the iteration did.
        config: The run's limits and promises.
        now_ms: The current epoch time in ms.

    Returns:
        The ``Decision``. Pure: the same inputs always give the same decision.
    """
    streak = stagnation_streak(counters, facts, config.stagnation_limit)
    digest = facts.response_digest if facts.progress is not Progress.MADE else None
    failing = facts.outcome in FAILED_OUTCOMES
    quick = facts.duration_ms < config.immediate_failure_ms
    same_failure = failing and facts.error_signature == counters.last_failure_signature
    failures = (counters.failure_streak + 1 if same_failure else 1) if failing and quick else 0
    neutral = facts.cut_short and facts.progress is not Progress.MADE
    if neutral:  # autopilot's crash, not the agent's doing: the streaks stand as they were
        streak, digest = counters.stagnation_streak, counters.last_response_digest
        failures = counters.failure_streak

    def decision(action: Action, reason: str | None = None, **kw: object) -> Decision:
        return Decision(
            action,
            reason,
            stagnation_streak=streak,
            failure_streak=failures,
            response_digest=digest,
            **kw,  # type: ignore[arg-type]
        )

    # 1. Stop or pause, honoured at the boundary whatever the agent said.
    if counters.stop_requested:
        return decision(Action.ABORT, Reason.USER_STOPPED, note="stop requested")
    if counters.pause_requested:
        return decision(Action.PAUSE)

    promises_allowed = counters.iterations_done >= config.min_iterations
    message = facts.final_message if facts.outcome is Outcome.OK else None
    # 2. Completion.
    if (
        promises_allowed
        and message is not None
        and not explicit_not_done(message)
        and promise_present(
            message, config.completion_promise, mode=config.match_mode, prompt=facts.prompt
        )
    ):
        return decision(Action.COMPLETE, Reason.COMPLETION_PROMISE)
    if (
        not promises_allowed
        and message is not None
        and promise_present(
            message, config.completion_promise, mode=config.match_mode, prompt=facts.prompt
        )
    ):
        early = (
            f"the completion promise came at iteration {counters.iterations_done}, before "
            f"--min-iterations {config.min_iterations}; going on"
        )
    else:
        early = None
    # 3. Abort promise.
    if promises_allowed and promise_present(
        message, config.abort_promise, mode=config.match_mode, prompt=facts.prompt
    ):
        return decision(Action.ABORT, Reason.ABORT_PROMISE, note="the agent gave the abort promise")

    # 4. Usage limits: wait and retry the same iteration; the breaker for failures.
    if facts.outcome is Outcome.RATE_LIMITED:
        # Attempts that hit a limit still spend; the spend budgets hold across them.
        reached = budget_reached(counters, config, iterations=False)
        if reached is not None:
            reason, budget = reached
            return decision(Action.ABORT, reason, note=budget_note(reason, budget))
        backoff = _backoff_ms(counters.rate_limit_waits + 1, config)
        until = facts.reset_at_ms if facts.reset_at_ms and facts.reset_at_ms > now_ms else None
        return Decision(
            Action.WAIT,
            "rate_limited",
            note=facts.error_text,
            stagnation_streak=counters.stagnation_streak,
            failure_streak=0,
            wait_until_ms=until if until is not None else now_ms + backoff,
            spends_iteration=False,
            response_digest=counters.last_response_digest,
        )
    if failing and facts.fatal:
        return decision(Action.ABORT, Reason.AGENT_FAILING, note=facts.error_text)
    if failures >= config.breaker_threshold:
        note = f"{failures} identical failures in a row: {facts.error_text or facts.outcome}"
        return decision(Action.ABORT, Reason.AGENT_FAILING, note=note)

    # 5. Stagnation.
    limit = config.stagnation_limit
    if limit > 0 and streak >= limit:
        note = f"{streak} iterations in a row without progress"
        return decision(Action.ABORT, Reason.STAGNATION, note=note)
    warning = early
    if limit > 1 and streak == limit - 1 and not neutral:
        warning = f"{streak} of {limit} iterations without progress; one more halts the run"

    # 6. Budgets.
    reached = budget_reached(counters, config)
    if reached is not None:
        reason, budget = reached
        return decision(Action.ABORT, reason, note=budget_note(reason, budget))

    # 8. Continue (after a backoff if the iteration failed quickly).
    if failures and not neutral:
        until = now_ms + _backoff_ms(failures, config)
        return decision(
            Action.BACKOFF, "failure", note=facts.error_text, wait_until_ms=until, warning=warning
        )
    return decision(Action.CONTINUE, warning=warning)


def budget_reached(
    counters: Counters, config: PolicyConfig, *, iterations: bool = True
) -> tuple[Reason, float] | None:
    """The first budget the counters have used up, with its limit, or None.

    With ``iterations`` False only the spend budgets (cost, tokens, duration) count.
    """
    for reason, spent, budget in (
        (
            Reason.MAX_ITERATIONS,
            counters.iterations_done,
            config.max_iterations if iterations else None,
        ),
        (Reason.MAX_COST, counters.cost_usd, config.max_cost_usd),
        (Reason.MAX_TOKENS, counters.tokens, config.max_tokens),
        (Reason.MAX_DURATION, counters.active_ms, config.max_duration_ms),
    ):
        if budget is not None and spent >= budget:
            return reason, budget
    return None


def budget_note(reason: Reason, budget: float) -> str:
    """``reached max_cost=$5`` — the budget with its unit, for people."""
    if reason is Reason.MAX_COST:
        shown = f"${budget:g}"
    elif reason is Reason.MAX_DURATION:
        shown = f"{budget / 1000:g}s"
    else:
        shown = f"{int(budget)}"
    return f"reached {reason.value}={shown}"


def _backoff_ms(attempt: int, config: PolicyConfig) -> int:
    return int(min(config.backoff_base_ms * 2 ** max(0, attempt - 1), config.backoff_max_ms))
