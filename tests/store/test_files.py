"""Reading a file a repository could have planted: regular, bounded, inside."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from autopilot.store.files import UnsafeFileError, read_bounded_file


def test_a_regular_file_within_the_cap_is_read(tmp_path: Path) -> None:
    (tmp_path / "a.toml").write_bytes(b"x" * 100)
    assert read_bounded_file(tmp_path / "a.toml", max_bytes=100) == b"x" * 100


def test_a_file_over_the_cap_is_refused(tmp_path: Path) -> None:
    (tmp_path / "a.toml").write_bytes(b"x" * 101)
    with pytest.raises(UnsafeFileError) as caught:
        read_bounded_file(tmp_path / "a.toml", max_bytes=100)
    assert caught.value.strerror == "is larger than 100 bytes"


def test_dev_zero_through_a_symlink_is_refused_without_reading(tmp_path: Path) -> None:
    (tmp_path / "config.toml").symlink_to("/dev/zero")
    with pytest.raises(UnsafeFileError) as caught:
        read_bounded_file(tmp_path / "config.toml", max_bytes=1024 * 1024)
    assert caught.value.strerror == "is a device, not a regular file"


def test_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "config.toml")
    with pytest.raises(UnsafeFileError) as caught:
        read_bounded_file(tmp_path / "config.toml", max_bytes=1024)
    assert caught.value.strerror == "is a FIFO, not a regular file"


def test_a_directory_and_a_socket_are_refused(tmp_path: Path) -> None:
    (tmp_path / "dir").mkdir()
    with pytest.raises(UnsafeFileError, match="is a directory"):
        read_bounded_file(tmp_path / "dir", max_bytes=1024)
    server = socket.socket(socket.AF_UNIX)
    try:
        server.bind(str(tmp_path / "sock"))
        with pytest.raises(OSError, match=r"No such device|is a socket"):
            read_bounded_file(tmp_path / "sock", max_bytes=1024)
    finally:
        server.close()


def test_a_symlink_leading_out_of_the_project_is_refused(tmp_path: Path) -> None:
    project = tmp_path / "repo"
    project.mkdir()
    secret = tmp_path / "secret.txt"
    secret.write_text("key")
    (project / "PROMPT.md").symlink_to(secret)
    with pytest.raises(UnsafeFileError) as caught:
        read_bounded_file(project / "PROMPT.md", max_bytes=1024, project=project)
    assert caught.value.strerror == f"is a symlink leading out of {project} (to {secret})"
    # Without a project (the user's own config), the same link is followed.
    assert read_bounded_file(project / "PROMPT.md", max_bytes=1024) == b"key"


def test_a_symlink_within_the_project_and_a_file_outside_it_are_read(tmp_path: Path) -> None:
    project = tmp_path / "repo"
    (project / "docs").mkdir(parents=True)
    (project / "docs" / "prompt.md").write_text("inside")
    (project / "PROMPT.md").symlink_to("docs/prompt.md")
    (tmp_path / "elsewhere.md").write_text("outside")
    assert read_bounded_file(project / "PROMPT.md", max_bytes=64, project=project) == b"inside"
    assert read_bounded_file(tmp_path / "elsewhere.md", max_bytes=64, project=project) == (
        b"outside"
    )


def test_a_missing_file_and_a_dangling_link_are_not_found(tmp_path: Path) -> None:
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    for path in (tmp_path / "missing", tmp_path / "dangling"):
        with pytest.raises(FileNotFoundError):
            read_bounded_file(path, max_bytes=64, project=tmp_path)
