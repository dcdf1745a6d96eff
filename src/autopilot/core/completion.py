"""Does a final message carry the completion (or abort) promise?

The rules: only the root agent's own final message
of the iteration is read, and only its prose: fenced code (also a longer fence around
a shorter one, and blank lines inside), indented code, inline code, ``>`` quotes (with
their lazy continuation lines), text between quote marks (``"…"``, ``'…'``, ``“…”``,
``‘…’``, ``„…“``, ``‚…‘``, ``«…»``, ``»…«``, ``‹…›``, ``「…」``, ``『…』``, also across
lines of a paragraph), tables and ``<!-- … -->`` comments are not the agent's own claim.

Match modes (``--completion-match``):

- ``sentence`` (default): the token stands as a sentence of its own — alone on a line
  or a whole sentence such as ``Done. COMPLETE`` (Markdown emphasis and closing ``.``
  or ``!`` allowed: ``**COMPLETE**``, ``COMPLETE.``) — or as
  ``<promise>TOKEN</promise>``. A token that is one word of a longer sentence or line
  (``Phase 1: COMPLETE``, ``Partially COMPLETE…``), a list item or a heading is not a
  claim; neither is a line that carries on a sentence from the line before it
  (``Phase 1:`` / ``COMPLETE``) or into the line after it (``COMPLETE`` / ``is what
  I'll say tomorrow``).
- ``word``: the looser rule: the token as a whole word anywhere in the prose.
- ``tag``: only ``<promise>TOKEN</promise>``.
- ``substring``: the token may sit inside a longer word.

In every mode an occurrence does not count in a question, a negated sentence, one that
states the token as an instruction or condition ("when every story passes, reply with
…"), or a line that repeats a line of our own prompt (a bare claim alone on its line
still counts: it cannot be told from the agent's own). An explicit machine-readable
"not done" (``EXIT_SIGNAL: false``, ``STATUS: IN_PROGRESS``) vetoes completion.
"""

from __future__ import annotations

import re
import sys
from bisect import bisect_right
from collections import defaultdict
from collections.abc import Iterator

from autopilot.core.vocabulary import MatchMode

_MASK = "\ue000"
"""Stands in for each character that is not prose (code, quotes, comments)."""

_FENCE_OPEN_RE = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")
_TABLE_DELIMITER_RE = re.compile(r"^\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?$")
_LIST_OR_HEADING_RE = re.compile(r"^([-+*]|\d{1,9}[.)]|#{1,6})(\s|$)")
_SENTENCE_BREAK_RE = re.compile(r"(?<=[.!?…])\s+")
_BACKTICKS_RE = re.compile(r"`+")
_QUOTE_CLOSERS = {
    '"': '"',
    "'": "'",
    "“": "”",
    "‘": "’",
    "„": "“”",
    "‚": "‘’",
    "«": "»",
    "»": "«",
    "‹": "›",
    "›": "‹",
    "「": "」",
    "『": "』",
}
_QUOTE_MARKS_RE = re.compile("[" + re.escape("".join(_QUOTE_CLOSERS)) + "]")
_CLOSER_CHARS = frozenset("".join(_QUOTE_CLOSERS.values()))
_APOSTROPHES = frozenset("'‘‚")
"""Single quote marks: unclosed, they open nothing (they are most often apostrophes)."""
_OPENS_AFTER = frozenset("([{<—–-/" + _MASK)
_UNCLOSED = sys.maxsize
_CARRIES_ON = frozenset(":,;-–—(/&+=\\")
_CONTINUES_WITH = frozenset(",;:()…–—")

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
_SAYS_FALSE_RE = re.compile(r"\s*[:=]\s*(false|no|0|pending|not yet)\b", re.IGNORECASE)


def explicit_not_done(message: str) -> bool:
    """True when the message carries an explicit machine-readable "not done"."""
    return bool(_NOT_DONE_RE.search(message))


def promise_present(
    message: str | None,
    token: str | None,
    *,
    mode: MatchMode = MatchMode.SENTENCE,
    prompt: str = "",
) -> bool:
    """Decide whether ``token`` stands as a promise in ``message``.

    Args:
        message: The root agent's final message of the iteration (None: no message).
        token: The promise token, e.g. ``COMPLETE``; None or empty never matches.
        mode: ``sentence``, ``word``, ``tag`` or ``substring`` (see the module
            docstring).
        prompt: The prompt we sent; a line of the message that repeats a line of
            it is an echo and never counts, unless it is a bare claim on its own.

    Returns:
        True if at least one occurrence counts.
    """
    if not message or not token:
        return False
    # Lines of the prompt as written and as masked, to compare with masked lines.
    prompt_lines = {
        _norm(line)
        for line in [*prompt.splitlines(), *(x for p in _paragraphs(prompt) for x in p)]
        if token in line
    }
    tag = f"<promise>{token}</promise>"
    bare = re.compile(rf"[*_]{{0,3}}{re.escape(token)}[.!]*[*_]{{0,3}}[.!]*")
    for lines in _paragraphs(message):
        for index, line in enumerate(lines):
            if token not in line:
                continue
            stripped = line.strip()
            bare_line = bool(bare.fullmatch(stripped)) or stripped == tag
            echo = not bare_line and _norm(line) in prompt_lines
            if mode is MatchMode.SENTENCE:
                if _tag_claim(lines, index, tag, echo) or _sentence_claim(lines, index, bare, echo):
                    return True
            elif not echo and _line_counts(line, token, tag, mode):
                return True
    return False


def _norm(line: str) -> str:
    return " ".join(line.split()).strip()


# -- what of a message is prose --------------------------------------------------------


def _paragraphs(message: str) -> Iterator[list[str]]:
    """The prose paragraphs of ``message``, each as its lines, with inline code and
    quoted text masked (every masked character but a newline becomes ``_MASK``)."""
    paragraph: list[str] = []
    for line in _prose_lines(message):
        if line is not None:
            paragraph.append(line)
            continue
        if paragraph:
            yield _mask_spans("\n".join(paragraph)).split("\n")
            paragraph = []
    if paragraph:
        yield _mask_spans("\n".join(paragraph)).split("\n")


def _prose_lines(message: str) -> list[str | None]:
    """Each line of ``message``, or None where it is not prose: blank, code (fenced,
    indented), a ``>`` quote and its lazy continuation, a table row, a whole-line
    comment. Fences follow CommonMark: a fence closes only with the same character,
    at least as many times, and an unclosed fence runs to the end."""
    out: list[str | None] = []
    fence: tuple[str, int] | None = None
    in_comment = in_quote = in_table = False
    for raw in message.splitlines():
        line = raw
        if fence is not None:
            if re.fullmatch(rf" {{0,3}}{re.escape(fence[0])}{{{fence[1]},}}\s*", line):
                fence = None
            out.append(None)
            continue
        if in_comment or "<!--" in line:
            line, in_comment = _mask_comments(line, in_comment)
            if not line.replace(_MASK, "").strip():
                out.append(None)
                continue
        opened = _FENCE_OPEN_RE.match(line)
        if opened and not (opened[1][0] == "`" and "`" in opened[2]):
            fence = (opened[1][0], len(opened[1]))
            out.append(None)
            continue
        stripped = line.strip()
        if not stripped:
            in_quote = in_table = False
            out.append(None)
        elif len(line.expandtabs(4)) - len(line.expandtabs(4).lstrip(" ")) >= 4:
            out.append(None)  # indented code (or an indented continuation: never a claim)
        elif in_quote or stripped.startswith(">"):
            in_quote = True
            out.append(None)
        elif in_table or stripped.startswith("|"):
            out.append(None)
        elif "|" in stripped and _TABLE_DELIMITER_RE.match(stripped) and out and out[-1]:
            out[-1] = None  # the header row
            in_table = True
            out.append(None)
        else:
            out.append(line)
    return out


def _mask_comments(line: str, in_comment: bool) -> tuple[str, bool]:
    """``line`` with ``<!-- … -->`` masked; whether a comment is still open at its end."""
    parts: list[str] = []
    at = 0
    while at < len(line):
        if in_comment:
            end = line.find("-->", at)
            stop = len(line) if end < 0 else end + 3
            parts.append(_MASK * (stop - at))
            at, in_comment = stop, end < 0
        else:
            start = line.find("<!--", at)
            stop = len(line) if start < 0 else start
            parts.append(line[at:stop])
            at, in_comment = stop, start >= 0
    return "".join(parts), in_comment


def _mask_spans(text: str) -> str:
    """``text`` (one paragraph) with code spans, then quoted text, masked."""
    chars = list(text)
    runs = [(m.start(), m.end()) for m in _BACKTICKS_RE.finditer(text)]
    by_length: defaultdict[int, list[int]] = defaultdict(list)
    for number, (start, end) in enumerate(runs):
        by_length[end - start].append(number)
    number = 0
    while number < len(runs):
        start, end = runs[number]
        same = by_length[end - start]
        later = bisect_right(same, number)
        if later == len(same):
            number += 1  # literal backticks
            continue
        _mask(chars, start, runs[same[later]][1])
        number = same[later] + 1
    coded = "".join(chars)
    closers: defaultdict[str, list[int]] = defaultdict(list)
    for match in _QUOTE_MARKS_RE.finditer(coded):
        if match[0] in _CLOSER_CHARS and _may_close(coded, match.start()):
            closers[match[0]].append(match.start())
    masked_to = 0
    for match in _QUOTE_MARKS_RE.finditer(coded):
        at, mark = match.start(), match[0]
        if at < masked_to or mark not in _QUOTE_CLOSERS or not _may_open(coded, at):
            continue
        end = min(_next(closers[closer], at) for closer in _QUOTE_CLOSERS[mark])
        if end == _UNCLOSED and mark in _APOSTROPHES:
            continue
        masked_to = min(end + 1, len(coded))  # an unclosed quote runs to the paragraph's end
        _mask(chars, at, masked_to)
    return "".join(chars)


def _next(positions: list[int], at: int) -> int:
    """The first of the sorted ``positions`` after ``at``, or ``_UNCLOSED``."""
    later = bisect_right(positions, at)
    return positions[later] if later < len(positions) else _UNCLOSED


def _mask(chars: list[str], start: int, end: int) -> None:
    for at in range(start, end):
        if chars[at] != "\n":
            chars[at] = _MASK


def _may_open(text: str, at: int) -> bool:
    if text[at] not in "\"'‘":
        return True
    before = text[at - 1] if at else " "
    after = text[at + 1] if at + 1 < len(text) else " "
    if text[at] == '"':
        return before.isspace() or before in _OPENS_AFTER
    return not before.isalnum() and not after.isspace()


def _may_close(text: str, at: int) -> bool:
    if text[at] not in "'’":
        return True
    before = text[at - 1] if at else " "
    after = text[at + 1] if at + 1 < len(text) else " "
    return not before.isspace() and not after.isalnum()


# -- claims ------------------------------------------------------------------------------


def _sentence_claim(lines: list[str], index: int, bare: re.Pattern[str], echo: bool) -> bool:
    """The token is a sentence of its own on line ``index`` of a paragraph."""
    line = lines[index].strip()
    if _LIST_OR_HEADING_RE.match(line):
        return False
    sentences = _SENTENCE_BREAK_RE.split(line)
    last = len(sentences) - 1
    for number, sentence in enumerate(sentences):
        if echo or not bare.fullmatch(sentence):
            continue
        if number == 0 and index > 0 and _carries_on(lines[index - 1]):
            continue
        if number == last and index < len(lines) - 1 and _continues(lines[index + 1]):
            continue
        return True
    return False


def _tag_claim(lines: list[str], index: int, tag: str, echo: bool) -> bool:
    """``<promise>TOKEN</promise>`` stands on line ``index`` of a paragraph."""
    if echo:
        return False
    line = lines[index]
    for match in re.finditer(re.escape(tag), line):
        opens_line = not _SENTENCE_END_RE.search(line, 0, match.start())
        if opens_line and index > 0 and _carries_on(lines[index - 1]):
            continue
        if _stands(line, match.start(), match.end()):
            return True
    return False


def _carries_on(previous: str) -> bool:
    """The line before a claim runs on into it: it ends with ``:``, ``,``, a dash…, or
    its last sentence negates or conditions what follows (``I am not saying``)."""
    text = previous.rstrip().rstrip("*_")
    if not text or text[-1] in ".!?…":
        return False
    if text[-1] in _CARRIES_ON:
        return True
    last = _SENTENCE_BREAK_RE.split(text)[-1]
    return bool(_NEGATION_RE.search(last) or _CONDITION_RE.search(last))


def _continues(following: str) -> bool:
    """The line after a claim carries its sentence on (``is what I'll say tomorrow``)."""
    text = following.lstrip()
    return bool(text) and (text[0].islower() or text[0] in _CONTINUES_WITH)


def _line_counts(line: str, token: str, tag: str, mode: MatchMode) -> bool:
    """``word``, ``tag`` and ``substring`` modes: an occurrence in ``line`` stands."""
    if mode is MatchMode.TAG:
        pattern = re.compile(re.escape(tag))
    elif mode is MatchMode.SUBSTRING:
        pattern = re.compile(re.escape(token))
    else:
        # A whole word; ``_`` around it is emphasis (``__COMPLETE__``).
        pattern = re.compile(rf"(?<![\w-])_*{re.escape(token)}(?!_*[^\W_]|_*-)")
    return any(_stands(line, m.start(), m.end()) for m in pattern.finditer(line))


def _stands(line: str, start: int, end: int) -> bool:
    """The occurrence ``line[start:end]`` is not negated, conditional, instructional
    or asked."""
    sentence_start = 0
    for match in _SENTENCE_END_RE.finditer(line, 0, start):
        sentence_start = match.end()
    # "<promise>" itself is markup, not prose.
    before = line[sentence_start:start].replace("<promise>", " ")
    if _NEGATION_RE.search(before) or _CONDITION_RE.search(before):
        return False
    after = line[end:]
    if after.startswith("</promise>"):
        after = after[len("</promise>") :]
    if _SAYS_FALSE_RE.match(after):
        return False  # "COMPLETE: false"
    after_sentence = re.split(r"[.!;](\s|$)", after, maxsplit=1)[0]
    if "?" in after_sentence[:40]:
        return False  # a question: "Is it COMPLETE?"
    return not re.match(r"\s*(is|was)?\s*(not|n't)\b", after_sentence)
