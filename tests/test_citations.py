"""Docstrings and comments cite what a clone of the repository has.

A citation names a file under ``docs/``, a public URL or the CLI version a format was
verified on; never a document kept outside the repository (the product's seeds, its
spec, its numbered field reports, the ``shared/`` folder beside the checkout).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
SCANNED = ("src/autopilot", "docs", "tests", "benchmarks", "scripts", "README.md", "CHANGELOG.md")
TEXT_SUFFIXES = {".py", ".md", ".txt", ".toml", ".json", ".sh"}
SKIPPED = (Path(__file__).resolve(), REPO_ROOT / "tests" / "data")
"""This file (its examples cite such documents) and captured CLI output."""

OUTSIDE_CITATION = re.compile(
    r"\b[Ss]eeds? ?\d{3}\b"  # seed 002, seeds 000/001
    r"|\bseeds/"
    r"|seed-event-contract|\bcontract §"
    r"|\bSPEC\b"
    r"|\b[Ff]ield reports? \d"
    r"|\.\./shared\b|\bshared/(?:reference|seeds|cases)\b|\breference/(?:streams|[\w-]+\.md)"
)
"""A citation of a document a clone of the repository does not have."""


def outside_citations(root: Path) -> list[str]:
    """``path:line: text`` of every line under ``root`` that cites such a document."""
    found = []
    for path in sorted(root.rglob("*")) if root.is_dir() else [root]:
        if path.suffix not in TEXT_SUFFIXES or not path.is_file():
            continue
        if any(path == skipped or skipped in path.parents for skipped in SKIPPED):
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        for number, line in enumerate(text.splitlines(), start=1):
            if OUTSIDE_CITATION.search(line):
                found.append(f"{path.relative_to(REPO_ROOT)}:{number}: {line.strip()}")
    return found


@pytest.mark.parametrize(
    "line",
    [
        "driver's notices enter the inbox here (seed 004).",
        "Seed 000's reader folds workitem_start",
        "A run written by the Node implementation of seeds 000/001",
        "copy the prompt from seeds/002_683127815a2830b1.txt",
        "(SPEC §11, seed 003)",
        "the seed system's stats (seed-event-contract §4.2)",
        "never executed (field report 22)",
        "Field reports 12-14, 19 and 20 describe what this guards against",
        "Format facts come from ``shared/reference/offline-e2e.md`` §2.",
        "see ../shared/STYLE.md",
        "what the CLI prints (``reference/streams/claude-stream.jsonl``)",
        "the versions in reference/agent-clis.md",
    ],
)
def test_outside_citations_are_recognised(line: str) -> None:
    assert OUTSIDE_CITATION.search(line)


@pytest.mark.parametrize(
    "line",
    [
        "as the seed reader does (``docs/formats.md``)",
        "msgspec.Struct and ToolSpec(spec)",
        "request_seed(body) and SeedStatus.RUNNING",
        "a pathspec for everything but autopilot's own files",
        '(``docs/architecture.md``, "Detached runs")',
        "https://github.com/umputun/ralphex/issues/444",
        "Verified on Codex 0.171.0's requests (``tests/data/codex-real/requests.json``)",
        "the XDG Base Directory Specification: https://specifications.freedesktop.org/",
    ],
)
def test_repository_citations_are_not_flagged(line: str) -> None:
    assert not OUTSIDE_CITATION.search(line)


@pytest.mark.parametrize("folder", SCANNED)
def test_no_citation_of_documents_outside_the_repository(folder: str) -> None:
    assert outside_citations(REPO_ROOT / folder) == []
