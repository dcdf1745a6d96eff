"""The memory file: created if missing, copied after each iteration, restored."""

from __future__ import annotations

from pathlib import Path

import pytest

from autopilot.store import memory
from autopilot.store.memory import (
    MAX_MEMORY_BYTES,
    TEMPLATE,
    ensure_memory,
    keep_copy,
    memory_paragraph,
    read_memory,
    restore_if_missing,
)


def test_created_once_and_never_overwritten(tmp_path: Path) -> None:
    assert ensure_memory(tmp_path) is True
    path = tmp_path / ".autopilot" / "memory.md"
    assert path.read_text() == TEMPLATE
    path.write_text("decided: keep SQLite\n")
    assert ensure_memory(tmp_path) is False
    assert path.read_text() == "decided: keep SQLite\n"


def test_a_deleted_memory_file_is_restored_from_the_run_copy(tmp_path: Path) -> None:
    project, run = tmp_path / "p", tmp_path / "run"
    project.mkdir()
    run.mkdir()
    assert restore_if_missing(project, run) is False  # nothing to restore from
    ensure_memory(project)
    (project / ".autopilot" / "memory.md").write_text("dead end: pydantic v1\n")
    assert keep_copy(project, run) is True
    copied = (run / "memory.md").stat()
    assert keep_copy(project, run) is True  # unchanged: the copy is not written again
    assert (run / "memory.md").stat().st_ino == copied.st_ino
    (project / ".autopilot" / "memory.md").write_text("dead end: pydantic v1 and v2\n")
    assert keep_copy(project, run) is True
    assert (run / "memory.md").read_text() == "dead end: pydantic v1 and v2\n"
    (project / ".autopilot" / "memory.md").write_text("dead end: pydantic v1\n")
    assert keep_copy(project, run) is True
    assert restore_if_missing(project, run) is False  # still there
    (project / ".autopilot" / "memory.md").unlink()
    (project / ".autopilot").rmdir()
    assert restore_if_missing(project, run) is True
    assert (project / ".autopilot" / "memory.md").read_text() == "dead end: pydantic v1\n"


def test_odd_memory_files_are_not_copied(tmp_path: Path) -> None:
    project, run = tmp_path / "p", tmp_path / "run"
    (project / ".autopilot").mkdir(parents=True)
    run.mkdir()
    secret = tmp_path / "secret"
    secret.write_text("token")
    (project / ".autopilot" / "memory.md").symlink_to(secret)
    assert keep_copy(project, run) is False
    assert ensure_memory(project) is False  # a link is left alone
    (project / ".autopilot" / "memory.md").unlink()
    (project / ".autopilot" / "memory.md").write_bytes(b"x" * (MAX_MEMORY_BYTES + 1))
    assert keep_copy(project, run) is False
    assert not (run / "memory.md").exists()


def test_the_prompt_paragraph_names_the_file_and_what_belongs_in_it(tmp_path: Path) -> None:
    text = memory_paragraph(tmp_path)
    assert str(tmp_path / ".autopilot" / "memory.md") in text
    for words in ("Read it first", "decisions and why", "constraints", "dead ends"):
        assert words in text


def test_read_memory_prefers_the_project_file(tmp_path: Path) -> None:
    project, run = tmp_path / "p", tmp_path / "run"
    project.mkdir()
    run.mkdir()
    assert read_memory(project, run) is None
    (run / "memory.md").write_text("old copy")
    assert read_memory(project, run) == (run / "memory.md", "old copy")
    ensure_memory(project)
    assert read_memory(project, run) == (project / ".autopilot" / "memory.md", TEMPLATE)


def test_an_unchanged_settled_memory_file_is_not_read_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once both files are found to hold the same bytes, and the memory file's last
    change is settled (a second old), neither is read while neither changes; a memory
    file changed in the same second is read every time."""
    project, run = tmp_path / "p", tmp_path / "run"
    project.mkdir()
    run.mkdir()
    ensure_memory(project)
    path = project / ".autopilot" / "memory.md"
    reads: list[Path] = []
    real = Path.read_bytes

    def counted(self: Path) -> bytes:
        reads.append(self)
        return real(self)

    monkeypatch.setattr(Path, "read_bytes", counted)
    assert keep_copy(project, run) and keep_copy(project, run)
    path.write_text(TEMPLATE.upper())  # same size, within the same second: seen
    assert keep_copy(project, run) is True
    assert (run / "memory.md").read_text() == TEMPLATE.upper()
    monkeypatch.setattr(memory, "_SETTLED_NS", -(10**18))  # every change counts as settled
    keep_copy(project, run)
    reads.clear()
    assert keep_copy(project, run) is True
    assert reads == []
    path.write_text("decided: keep SQLite\n")
    assert keep_copy(project, run) is True
    assert (run / "memory.md").read_text() == "decided: keep SQLite\n"
    (run / "memory.md").unlink()  # the copy deleted: made again
    assert keep_copy(project, run) is True
    assert (run / "memory.md").read_text() == "decided: keep SQLite\n"
