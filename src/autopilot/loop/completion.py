"""Does a final message carry the completion (or abort) promise?

The rules (SPEC §7.2, field reports 1 and 2): only the root agent's own final
message of the iteration is read; the token must stand as a token — a whole word,
alone on its line, or ``<promise>TOKEN</promise>`` — and an occurrence does not count
inside a code fence, inline code, a quotation (``>`` line or quote marks), a line that
echoes our own prompt, or a sentence that negates it or states it as an instruction
or condition ("when every story passes, reply with …"). An explicit machine-readable
"not done" (``EXIT_SIGNAL: false``, ``STATUS: IN_PROGRESS``) vetoes completion.

Match modes (``--completion-match``): ``word`` (default) as above; ``tag`` only the
``<promise>`` form counts; ``substring`` the token may sit inside a longer word.
"""

from __future__ import annotations

import re
from enum import StrEnum


class MatchMode(StrEnum):
    """How strictly a promise token must stand in the final message."""

    WORD = "word"
    TAG = "tag"
    SUBSTRING = "substring"


_FENCE_RE = re.compile(r"^\s*(```|~~~)")
_INLINE_CODE_RE = re.compile(r"`[^`\n]*`")
_QUOTED_RE = re.compile(r"\"[^\"\n]*\"|“[^”\n]*”|‘[^’\n]*’|(?<![A-Za-z])'[^'\n]*'(?![A-Za-z])")
_NEGATION_RE = re.compile(
    r"\b(not|never|no|nothing|none|without|cannot|can't|won't|don't|didn't|isn't|aren't|"
    r"wasn't|haven't|hasn't|shouldn't|mustn't|nor|yet to|is it|are we|am i)\b",
    re.IGNORECASE,
)
_CONDITION_RE = re.compile(
    r"\b(if|when|whenever|once|until|unless|after|before|reply with|respond with|"
    r"output|print|emit|say|write|type|include|reminder|remember|should|must|will|"
    r"would|only)\b",
    re.IGNORECASE,
)
_NOT_DONE_RE = re.compile(
    r"^\s*(EXIT_SIGNAL\s*[:=]\s*false|STATUS\s*[:=]\s*(IN_PROGRESS|NOT_DONE|INCOMPLETE|"
    r"BLOCKED|WORKING))\b",
    re.IGNORECASE | re.MULTILINE,
)
_SENTENCE_END_RE = re.compile(r"[.!?;:](\s|$)")


def explicit_not_done(message: str) -> bool:
    """True when the message carries an explicit machine-readable "not done"."""
    return bool(_NOT_DONE_RE.search(message))


def promise_present(
    message: str | None,
    token: str | None,
    *,
    mode: MatchMode = MatchMode.WORD,
    prompt: str = "",
) -> bool:
    """Decide whether ``token`` stands as a promise in ``message``.

    Args:
        message: The root agent's final message of the iteration (None: no message).
        token: The promise token, e.g. ``COMPLETE``; None or empty never matches.
        mode: ``word``, ``tag`` or ``substring`` (see the module docstring).
        prompt: The prompt we sent; a line of the message that repeats a line of
            it is an echo and never counts.

    Returns:
        True if at least one occurrence counts.
    """
    if not message or not token:
        return False
    prompt_lines = {_norm(line) for line in prompt.splitlines() if token in line}
    in_fence = False
    for raw_line in message.splitlines():
        if _FENCE_RE.match(raw_line):
            in_fence = not in_fence
            continue
        if in_fence or token not in raw_line:
            continue
        line = raw_line.strip()
        if line.startswith(">") or _norm(line) in prompt_lines:
            continue
        if _line_counts(line, token, mode):
            return True
    return False


def _norm(line: str) -> str:
    return " ".join(line.split()).strip()


def _line_counts(line: str, token: str, mode: MatchMode) -> bool:
    tag = f"<promise>{token}</promise>"
    visible = _INLINE_CODE_RE.sub(" ", line)
    visible = _QUOTED_RE.sub(" ", visible)
    if mode is MatchMode.TAG:
        positions = [m.start() for m in re.finditer(re.escape(tag), visible)]
    elif mode is MatchMode.SUBSTRING:
        positions = [m.start() for m in re.finditer(re.escape(token), visible)]
    else:
        pattern = re.compile(rf"(?<![\w-]){re.escape(token)}(?![\w-])")
        positions = [m.start() for m in pattern.finditer(visible)]
    return any(_stands(visible, position, token) for position in positions)


def _stands(line: str, position: int, token: str) -> bool:
    """The occurrence at ``position`` is not negated, conditional or instructional."""
    sentence_start = 0
    for match in _SENTENCE_END_RE.finditer(line, 0, position):
        sentence_start = match.end()
    before = line[sentence_start:position]
    # "<promise>" itself is markup, not prose.
    before = before.replace("<promise>", " ")
    if _NEGATION_RE.search(before) or _CONDITION_RE.search(before):
        return False
    after = line[position + len(token) :]
    if re.match(r"\s*(</promise>)?\s*[:=]\s*(false|no|0|pending|not yet)\b", after, re.IGNORECASE):
        return False  # "COMPLETE: false"
    after_sentence = re.split(r"[.!;](\s|$)", after, maxsplit=1)[0]
    if "?" in after_sentence.split("\n")[0][:40]:
        return False  # a question: "Is it COMPLETE?"
    return not re.match(r"\s*(</promise>)?\s*(is|was)?\s*(not|n't)\b", after_sentence)
