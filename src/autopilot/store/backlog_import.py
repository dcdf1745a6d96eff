"""Work items from the formats users already have (pure): ``prd.json`` and Markdown.

* ``prd.json`` as snarktank/ralph and ralph-tui write it
  (https://github.com/snarktank/ralph, ``prd.json.example``): ``userStories``, each
  with ``id``, ``title``, ``description``, ``acceptanceCriteria`` (strings),
  ``priority`` (lower first), ``passes`` (true: already done) and ``dependsOn``
  (story ids, or ids of the backlog's items: ``depends_on``).
* A Markdown checklist: every ``- [ ] text`` (or ``*``/``+``) is an open item,
  ``- [x] text`` a completed one, in the order they appear; a checklist line indented
  under an item's line is an acceptance criterion of that item, not an item.

Neither format has check commands: criteria imported are the agent's word until a
person adds checks (``unchecked`` names the open items that complete on it).

Items imported as done carry the evidence ``imported as done from FILE``: the user's
own word, which is all there is. An entry whose prompt an item of the backlog already
has is skipped (counted, never given an id), so importing the same file twice, or a
checklist that grew, adds only what is new.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from autopilot.core.structs import replace
from autopilot.core.workitems import (
    ID_PATTERN,
    Completion,
    CompletionState,
    Criterion,
    ItemStatus,
    Verdict,
    WorkItem,
)
from autopilot.errors import BacklogError

_CHECKBOX_RE = re.compile(r"^(\s*)[-*+]\s+\[( |x|X)\]\s+(.+?)\s*$")


@dataclass(frozen=True)
class Imported:
    """What an import found.

    Attributes:
        items: The new work items, in the order to append them.
        skipped: Entries skipped because the backlog already has their prompt.
    """

    items: list[WorkItem]
    skipped: int = 0


def free_id(taken: Collection[str], prefix: str = "task") -> str:
    """The first ``<prefix>-N`` (N from 1) not in ``taken``."""
    number = 1
    while f"{prefix}-{number}" in taken:
        number += 1
    return f"{prefix}-{number}"


def _slug_id(text: str, taken: Collection[str]) -> str:
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-._")[:64]
    if slug and ID_PATTERN.match(slug) and slug not in taken:
        return slug
    return free_id(taken)


def _done(source: str) -> Completion:
    return Completion(
        state=CompletionState.PASSED,
        verdict=Verdict.PASS,
        evidence=(f"imported as done from {source}",),
    )


def parse_prd_json(
    data: bytes, source: str, taken: Collection[str], known: Collection[str] = ()
) -> Imported:
    """Work items from a ``prd.json``, by ``priority`` (then file order).

    Args:
        data: The file's bytes.
        source: The file's name, for messages and evidence.
        taken: Ids already in the backlog (a story with such an id gets a new one).
        known: Prompts already in the backlog (a story with such a prompt is skipped);
            a mapping to their items' ids lets a ``dependsOn`` name a skipped story.

    Raises:
        BacklogError: not JSON, no ``userStories`` list of objects, two stories with
            one id, or a ``dependsOn`` that names no story of the file nor item of the
            backlog.
    """
    try:
        value = json.loads(data.decode("utf-8"))
    except json.JSONDecodeError as error:
        raise BacklogError(
            f"{source}: not valid JSON (line {error.lineno}, column {error.colno}: {error.msg})"
        ) from None
    except (UnicodeDecodeError, ValueError, RecursionError) as error:
        raise BacklogError(f"{source}: not valid JSON ({error})") from None
    stories = value.get("userStories") if isinstance(value, dict) else None
    if not isinstance(stories, list) or not all(isinstance(s, dict) for s in stories):
        raise BacklogError(f"{source}: no 'userStories' list of objects (a prd.json)")
    seen_ids: set[str] = set()
    for story in stories:
        story_id = _str(story.get("id"))
        if story_id and story_id in seen_ids:
            raise BacklogError(
                f"{source}: story id {story_id!r} is used by more than one story; give each "
                "its own id; nothing was imported"
            )
        seen_ids.add(story_id)
    ordered = sorted(enumerate(stories), key=lambda pair: (_priority(pair[1]), pair[0]))
    used = set(taken)
    items: list[WorkItem] = []
    skipped = 0
    story_ids: dict[str, str] = {}  # a story's id -> its item's id (in the backlog or new)
    wanted: dict[str, list[str]] = {}  # an item's id -> the story ids it depends on
    for _, story in ordered:
        title = _str(story.get("title"))
        description = _str(story.get("description"))
        prompt = "\n\n".join(part for part in (title, description) if part)
        notes = _str(story.get("notes"))
        if notes:
            prompt += f"\n\nNotes: {notes}"
        story_id = _str(story.get("id"))
        if prompt in known:
            skipped += 1
            existing = known.get(prompt) if isinstance(known, Mapping) else None
            if story_id and isinstance(existing, str):
                story_ids.setdefault(story_id, existing)
            continue
        item_id = _slug_id(story_id or title or "", used)
        used.add(item_id)
        if story_id:
            story_ids.setdefault(story_id, item_id)
        wanted[item_id] = _story_ids(story.get("dependsOn"), source, story_id or item_id)
        criteria = story.get("acceptanceCriteria")
        texts = [c for c in criteria if isinstance(c, str)] if isinstance(criteria, list) else []
        items.append(
            WorkItem(
                id=item_id,
                status=ItemStatus.COMPLETED if story.get("passes") is True else ItemStatus.READY,
                title=title or None,
                prompt=prompt,
                acceptance_criteria=tuple(
                    Criterion(f"ac{n}", text, plain=True) for n, text in enumerate(texts, 1)
                ),
                completion=_done(source) if story.get("passes") is True else Completion(),
            )
        )
    return Imported(_with_dependencies(items, wanted, story_ids, taken, source), skipped)


def _story_ids(value: Any, source: str, story: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise BacklogError(f"{source}: story {story}: dependsOn must be a list of story ids")
    return [v.strip() for v in value if v.strip()]


def _with_dependencies(
    items: list[WorkItem],
    wanted: Mapping[str, list[str]],
    story_ids: Mapping[str, str],
    taken: Collection[str],
    source: str,
) -> list[WorkItem]:
    """``items`` with each story's ``dependsOn`` as ``depends_on``: a story id of the
    file (as the id its item got), or an id the backlog already has.

    Raises:
        BacklogError: a ``dependsOn`` names neither.
    """
    done: list[WorkItem] = []
    for item in items:
        deps: list[str] = []
        for name in wanted.get(item.id, []):
            dep = story_ids.get(name) or (name if name in taken else None)
            if dep is None:
                raise BacklogError(
                    f"{source}: story {item.id} depends on {name!r}, which is neither a story "
                    "of the file nor a work item of the backlog; nothing was imported"
                )
            if dep not in deps and dep != item.id:
                deps.append(dep)
        done.append(replace(item, depends_on=tuple(deps)) if deps else item)
    return done


def _priority(story: dict[str, Any]) -> float:
    value = story.get("priority")
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return float("inf")


def _str(value: Any) -> str:
    return value.strip() if isinstance(value, str) else ""


def parse_markdown_checklist(
    text: str, source: str, taken: Collection[str], known: Collection[str] = ()
) -> Imported:
    """Work items from the ``- [ ]`` / ``- [x]`` lines of a Markdown file, in order
    (``taken`` and ``known`` as for ``parse_prd_json``).

    Raises:
        BacklogError: the file has no checklist line.
    """
    used = set(taken)
    items: list[WorkItem] = []
    criteria: dict[int, list[str]] = {}
    skipped = 0
    parent_indent: int | None = None
    parent: int | None = None  # index in items; None while under a skipped entry
    for line in text.splitlines():
        match = _CHECKBOX_RE.match(line)
        if match is None:
            continue
        indent = len(match.group(1).expandtabs(4))
        done = match.group(2) in "xX"
        task = match.group(3)
        if parent_indent is not None and indent > parent_indent:
            if parent is not None:
                criteria[parent].append(task)
            continue
        parent_indent = indent
        if task in known:
            skipped += 1
            parent = None
            continue
        item_id = free_id(used)
        used.add(item_id)
        parent = len(items)
        criteria[parent] = []
        items.append(
            WorkItem(
                id=item_id,
                status=ItemStatus.COMPLETED if done else ItemStatus.READY,
                title=task,
                prompt=task,
                completion=_done(source) if done else Completion(),
            )
        )
    if not items and not skipped:
        raise BacklogError(f"{source}: no checklist lines ('- [ ] …') to import")
    with_criteria = [
        replace(
            item,
            acceptance_criteria=tuple(
                Criterion(f"ac{n}", words, plain=True) for n, words in enumerate(criteria[index], 1)
            ),
        )
        for index, item in enumerate(items)
    ]
    return Imported(with_criteria, skipped)


def unchecked(items: Sequence[WorkItem]) -> list[str]:
    """Ids of the open ``items`` with a criterion that has no ``check`` command, or no
    criteria at all: they complete on the agent's report alone."""
    return [
        item.id
        for item in items
        if item.is_open
        and (
            not item.acceptance_criteria
            or any(not criterion.check for criterion in item.acceptance_criteria)
        )
    ]


def parse_import(data: bytes, source: str, existing: Sequence[WorkItem]) -> Imported:
    """Work items from ``data``: a ``prd.json`` if it is named ``*.json`` or is a JSON
    object, else Markdown; none of the ``existing`` items' ids, nor their prompts.

    Raises:
        BacklogError: neither format, not valid JSON (with its line and column), or
            not UTF-8.
    """
    taken = [item.id for item in existing]
    known = {item.prompt: item.id for item in reversed(existing) if item.prompt}
    if source.lower().endswith(".json") or data.lstrip().startswith((b"{", b"[")):
        return parse_prd_json(data, source, taken, known)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise BacklogError(f"{source}: not UTF-8 text") from None
    return parse_markdown_checklist(text, source, taken, known)
