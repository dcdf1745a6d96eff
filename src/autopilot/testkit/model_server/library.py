"""The built-in scripts of the fake model, by name (``SCRIPTS``, ``get_script``), made
of the actions and rules of :mod:`.scripts`."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from autopilot.testkit.model_server.scripts import (
    Action,
    Drop,
    ErrorKind,
    HttpError,
    Rule,
    RunShell,
    Say,
    Script,
    Slow,
    Stall,
    WriteFile,
)

HELLO = WriteFile("hello.txt", "hello from the fake model\n")
APPEND = RunShell("echo second-turn >> hello.txt && cat hello.txt")
CHECK = RunShell("cat hello.txt 2>/dev/null || echo MISSING")

_DEFAULT = (
    Rule(HELLO, turn=0, step=0),
    Rule(Say("done. COMPLETE"), turn=0, step=1),
    Rule(APPEND, turn=1, step=0),
    Rule(Say("second turn done. COMPLETE"), turn=1, step=1),
)


def _backlog_item(
    item: str, content: str, *, criteria: str = "ac1", prompt: str | None = None
) -> tuple[Rule, ...]:
    """Work on backlog item ``item``: write ``content`` (one word) to ``<item>.txt``,
    report, say so."""
    where = prompt or f"work-item: {item}\n"
    flags = " ".join(f"--criterion {c}=pass" for c in criteria.split())
    report = f"autopilot report continue_next --item {item} {flags} --evidence 'wrote {item}.txt'"
    return (
        # The shell, not a write tool: some CLIs refuse to overwrite a file they never read.
        Rule(RunShell(f"echo {content} > {item}.txt"), step=0, prompt_contains=where),
        Rule(RunShell(report), step=1, prompt_contains=where),
        Rule(Say(f"Reported continue_next for {item}."), prompt_contains=where),
    )


BACKLOG_RULES = (
    *_backlog_item("alpha", "alpha"),
    # beta's check wants "fixed": the first attempt writes a draft, the reopened one fixes
    # it (only beta is ever reopened).
    *_backlog_item("beta", "fixed", prompt="reopen-target: micro"),
    *_backlog_item("beta", "draft"),
    *_backlog_item("gamma", "gamma"),
)
"""The ``backlog`` script: three work items, one of whose checks fails once."""


def _always(action: Action) -> tuple[Rule, ...]:
    return (Rule(action),)


def _slowed(rules: tuple[Rule, ...], delay_seconds: float) -> tuple[Rule, ...]:
    return tuple(
        Rule(Slow(r.action, delay_seconds), r.turn, r.step, r.result_contains, r.prompt_contains)
        for r in rules
        if isinstance(r.action, WriteFile | RunShell | Say)
    )


def _backlog_rules(*items: tuple[str, str]) -> tuple[Rule, ...]:
    """Per work item (id, file): write the file, report ``continue_next`` with
    ``autopilot report`` (``$AUTOPILOT`` when set), then say the item is done."""
    rules: list[Rule] = []
    for item_id, file_name in items:
        marker = f"work-item: {item_id}"
        report = (
            f'echo {item_id} > {file_name} && "${{AUTOPILOT:-autopilot}}" report continue_next '
            f"--item {item_id} --criterion ac1=pass"
        )
        rules.append(Rule(RunShell(report), step=0, prompt_contains=marker))
        rules.append(Rule(Say(f"{item_id} done"), prompt_contains=marker))
    return (*rules, Rule(Say("ready")))


KEEP_WORKING = "Keep working"
"""What ``stop-self`` looks for in the prompt before it runs ``autopilot stop``."""

USAGE_LIMIT_RESET_SECONDS = 3600
"""How far away ``usage-limit-429`` puts the reset, like a plan's hourly window."""

RECOVER_SECONDS = 10.0
"""The default 429 window of ``recover-429``."""

SCRIPTS: Mapping[str, Script] = MappingProxyType(
    {
        s.name: s
        for s in (
            Script("default", _DEFAULT),
            Script(
                "check-then-write",
                (
                    Rule(CHECK, step=0),
                    Rule(HELLO, step=1, result_contains="MISSING"),
                    Rule(Say("hello.txt is in place. <promise>COMPLETE</promise>"), step=1),
                    Rule(Say("wrote hello.txt; will verify next iteration."), step=2),
                ),
            ),
            Script(
                "continue",
                (
                    Rule(HELLO, turn=0, step=0),
                    Rule(Say("wrote hello.txt; not finished yet."), turn=0, step=1),
                    Rule(APPEND, turn=1, step=0),
                    Rule(Say("second turn done. COMPLETE"), turn=1, step=1),
                ),
            ),
            Script("auth-401", _always(HttpError(ErrorKind.AUTH))),
            Script("rate-429", _always(HttpError(ErrorKind.RATE_LIMIT, retry_after_seconds=1))),
            Script("rate-429-no-reset", _always(HttpError(ErrorKind.RATE_LIMIT))),
            Script(
                "usage-limit-429",
                _always(
                    HttpError(ErrorKind.USAGE_LIMIT, retry_after_seconds=USAGE_LIMIT_RESET_SECONDS)
                ),
            ),
            Script("server-500", _always(HttpError(ErrorKind.SERVER))),
            Script("slow-stream", _slowed(_DEFAULT, 0.25)),
            Script("stall", _always(Stall())),
            Script("drop-stream", _always(Drop())),
            Script("recover-429", _DEFAULT, fail_for_seconds=RECOVER_SECONDS),
            Script("backlog", BACKLOG_RULES),
            Script("backlog-two", _backlog_rules(("item-1", "one.txt"), ("item-2", "two.txt"))),
            Script(
                "stop-self",
                (
                    Rule(
                        RunShell('"${AUTOPILOT:-autopilot}" stop'),
                        step=0,
                        prompt_contains=KEEP_WORKING,
                    ),
                    Rule(Say("still working on it"), prompt_contains=KEEP_WORKING),
                    Rule(Say("ready")),
                ),
            ),
        )
    }
)
"""The built-in scripts by name.

- ``default``: turn 0 writes hello.txt then says "done. COMPLETE"; turn 1 appends a
  line with the shell then says "second turn done. COMPLETE".
- ``check-then-write``: every turn looks for hello.txt, writes it if missing and
  defers the completion promise to the next turn.
- ``continue``: like ``default`` but turn 0 ends without the token.
- ``auth-401``, ``rate-429`` (reset in 1 s), ``rate-429-no-reset``,
  ``usage-limit-429`` (reset in an hour), ``server-500``: every tools-bearing request
  fails so.
- ``slow-stream``: ``default`` with 0.25 s before every chunk.
- ``stall``: headers and the first event, then silence.
- ``drop-stream``: two chunks, then the connection closes.
- ``recover-429``: ``default`` after :data:`RECOVER_SECONDS` of 429s from the start.
- ``backlog``: for a backlog run's work items ``alpha``, ``beta`` and ``gamma``
  (continuation messages, ``work-item: ID``): write ``<id>.txt``, then run
  ``autopilot report continue_next`` with the shell; ``beta`` is a draft on its first
  attempt and ``fixed`` on its second.
- ``backlog-two``: a prompt naming ``work-item: item-1`` (``item-2``) writes
  ``one.txt`` (``two.txt``) and reports ``continue_next`` for it, then says it is done;
  any other says "ready".
- ``stop-self``: a prompt holding :data:`KEEP_WORKING` runs ``autopilot stop`` with the
  shell (``$AUTOPILOT`` when set: a login shell may not have autopilot on its PATH),
  then says "still working on it" (never the promise); any other says "ready".
"""


def get_script(name: str) -> Script:
    """Return the built-in script called ``name``.

    Raises:
        KeyError: No such script; the message lists the known names.
    """
    try:
        return SCRIPTS[name]
    except KeyError:
        raise KeyError(f"unknown script {name!r}; known: {', '.join(SCRIPTS)}") from None
