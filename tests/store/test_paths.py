"""Runs root and RUN resolution (``docs/formats.md``, "The runs root and a run folder")."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from autopilot.errors import RunNotFoundError, RunsRootError, UsageError
from autopilot.store.paths import (
    RUNS_DIR_ENV,
    is_valid_run_id,
    list_run_ids,
    make_run_id,
    resolve_run,
    run_dir,
    runs_root,
    started_at_of,
    valid_run_ids,
    validate_label,
)

IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0


# --- runs root ------------------------------------------------------------------------------


def test_runs_root_honours_the_environment_and_creates_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(RUNS_DIR_ENV, str(tmp_path / "a" / "runs"))
    root = runs_root()
    assert root == (tmp_path / "a" / "runs").resolve()
    assert root.is_dir()
    assert root.stat().st_mode & 0o077 == 0


def test_a_relative_runs_root_is_made_absolute(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(RUNS_DIR_ENV, "  rel/runs \n")
    root = runs_root()
    assert root.is_absolute()
    assert root == (tmp_path / "rel" / "runs").resolve()
    assert root.is_dir()


def test_runs_root_without_create_does_not_make_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(RUNS_DIR_ENV, str(tmp_path / "missing"))
    assert runs_root(create=False) == tmp_path / "missing"
    assert not (tmp_path / "missing").exists()


def test_runs_root_defaults_to_the_user_state_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(RUNS_DIR_ENV, raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert runs_root() == (tmp_path / "state" / "autopilot" / "runs").resolve()


def test_a_blank_environment_value_means_the_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(RUNS_DIR_ENV, "   ")
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.chdir(tmp_path)
    assert runs_root() == (tmp_path / "state" / "autopilot" / "runs").resolve()


def _one_line_error(create: bool = True) -> str:
    with pytest.raises(RunsRootError) as caught:
        runs_root(create=create)
    message = str(caught.value)
    assert "\n" not in message
    assert caught.value.exit_code == 4
    return message


@pytest.mark.parametrize("create", [True, False])
def test_a_runs_root_that_is_a_file_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, create: bool
) -> None:
    (tmp_path / "runs").write_text("x")
    monkeypatch.setenv(RUNS_DIR_ENV, str(tmp_path / "runs"))
    message = _one_line_error(create)
    assert "not a directory" in message
    assert str(tmp_path / "runs") in message


def test_a_runs_root_under_a_file_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "file").write_text("x")
    monkeypatch.setenv(RUNS_DIR_ENV, str(tmp_path / "file" / "runs"))
    assert "cannot create runs root" in _one_line_error()


def test_a_symlink_to_a_directory_is_accepted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    monkeypatch.setenv(RUNS_DIR_ENV, str(tmp_path / "link"))
    assert runs_root() == (tmp_path / "real").resolve()


@pytest.mark.skipif(IS_ROOT, reason="root can write anywhere")
def test_an_unwritable_runs_root_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "runs"
    root.mkdir()
    root.chmod(0o500)
    monkeypatch.setenv(RUNS_DIR_ENV, str(root))
    try:
        assert "not writable" in _one_line_error()
    finally:
        root.chmod(0o700)


@pytest.mark.skipif(not IS_ROOT, reason="needs root to give the directory away")
def test_a_runs_root_owned_by_someone_else_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "runs"
    root.mkdir()
    os.chown(root, 4242, 4242)
    monkeypatch.setenv(RUNS_DIR_ENV, str(root))
    assert "not owned by this user" in _one_line_error()


# --- run ids and labels ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "run_id",
    [
        "ralph-tui-prompt-1700000000000",
        "ralph-tui-self-improve-1700000000000",
        "demo-1700000000",
        "a.b_c-1234567890123456",
    ],
)
def test_valid_run_ids(run_id: str) -> None:
    assert is_valid_run_id(run_id)
    assert run_dir(Path("/runs"), run_id) == Path("/runs") / run_id


@pytest.mark.parametrize(
    "run_id",
    [
        "",
        "demo",
        "demo-123",
        "a/b-1700000000000",
        "../demo-1700000000000",
        "demo/../x-1700000000000",
        "a..b-1700000000000",
        "a\\b-1700000000000",
        "..\\x-1700000000000",
        "demo\x00-1700000000000",
        "demo-1700000000000\x00",
        "demo-1700000000000\n",
        "demo-1700000000000/",
        "/demo-1700000000000",
        "-demo-1700000000000",
        ".demo-1700000000000",
        "dé-1700000000000",
        "x" * 65 + "-1700000000000",
    ],
)
def test_invalid_run_ids_are_refused(run_id: str) -> None:
    assert not is_valid_run_id(run_id)
    with pytest.raises(UsageError, match="invalid run id"):
        run_dir(Path("/runs"), run_id)


def test_make_run_id_is_label_dash_epoch_ms() -> None:
    run_id = make_run_id("ralph-tui-prompt", 1700000000123)
    assert run_id == "ralph-tui-prompt-1700000000123"
    assert is_valid_run_id(run_id)
    assert started_at_of(run_id) == 1700000000123


@pytest.mark.parametrize(
    "label", ["", "a/b", "a\\b", "..", "a..b", "a\x00", "a\n", "a b", ".hidden", "x" * 65]
)
def test_bad_labels_are_refused(label: str) -> None:
    with pytest.raises(UsageError, match="invalid label"):
        validate_label(label)
    with pytest.raises(UsageError):
        make_run_id(label, 1700000000000)


# --- resolving RUN --------------------------------------------------------------------------


def make_run(root: Path, run_id: str, cwd: str | None = "/proj/a") -> str:
    folder = root / run_id
    folder.mkdir(parents=True)
    state: dict[str, object] = {"runId": run_id, "version": 1}
    if cwd is not None:
        state["cwd"] = cwd
    (folder / "state.json").write_text(json.dumps(state))
    return run_id


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = tmp_path / "runs"
    root.mkdir()
    make_run(root, "alpha-1700000000000", "/proj/a")
    make_run(root, "beta-1700000005000", "/proj/b")
    make_run(root, "alpha-1700000002000", "/proj/a")
    make_run(root, "beta-1700000009000", "/proj/b")
    make_run(root, "gamma-1700000001000", "/proj/a")
    # Not runs: no state.json, a file, an invalid name.
    (root / "delta-1700000099999").mkdir()
    (root / "index.jsonl").write_text("")
    (root / "junk").mkdir()
    (root / "junk" / "state.json").write_text("{}")
    return root


def test_list_run_ids_is_newest_first_and_only_real_runs(root: Path) -> None:
    assert list_run_ids(root) == [
        "beta-1700000009000",
        "beta-1700000005000",
        "alpha-1700000002000",
        "gamma-1700000001000",
        "alpha-1700000000000",
    ]
    assert list_run_ids(root / "missing") == []


def test_resolve_an_exact_id(root: Path) -> None:
    assert resolve_run(root, "alpha-1700000000000") == "alpha-1700000000000"


def test_an_exact_id_wins_over_a_longer_id_it_prefixes(root: Path) -> None:
    make_run(root, "alpha-17000000000001")
    assert resolve_run(root, "alpha-1700000000000") == "alpha-1700000000000"
    assert resolve_run(root, "alpha-17000000000001") == "alpha-17000000000001"


@pytest.mark.parametrize(
    ("prefix", "expected"),
    [("g", "gamma-1700000001000"), ("beta-1700000009", "beta-1700000009000")],
)
def test_resolve_a_unique_prefix(root: Path, prefix: str, expected: str) -> None:
    assert resolve_run(root, prefix) == expected


@pytest.mark.parametrize(("prefix", "count"), [("alpha", 2), ("beta-17", 2), ("a", 2)])
def test_an_ambiguous_prefix_names_the_count(root: Path, prefix: str, count: int) -> None:
    with pytest.raises(RunNotFoundError) as caught:
        resolve_run(root, prefix)
    message = str(caught.value)
    assert f"matches {count} runs" in message
    assert "\n" not in message
    assert caught.value.exit_code == 2


@pytest.mark.parametrize("ref", ["zeta", "alpha-2", "delta-1700000099999", "junk"])
def test_an_unknown_run_is_not_found(root: Path, ref: str) -> None:
    with pytest.raises(RunNotFoundError, match="no run matches"):
        resolve_run(root, ref)


@pytest.mark.parametrize(
    "ref", ["../runs", "alpha/../beta", "alpha\\x", "alpha\x00", "..", "alpha-1700000000000/"]
)
def test_a_reference_with_separators_or_traversal_is_refused(root: Path, ref: str) -> None:
    with pytest.raises(RunNotFoundError, match="invalid run reference"):
        resolve_run(root, ref)


def test_an_omitted_run_is_the_newest_of_the_project(root: Path) -> None:
    assert resolve_run(root, None, project=Path("/proj/a")) == "alpha-1700000002000"
    assert resolve_run(root, None, project=Path("/proj/b")) == "beta-1700000009000"


def test_an_omitted_run_without_a_project_is_the_newest_run(root: Path) -> None:
    assert resolve_run(root, None) == "beta-1700000009000"


def test_an_omitted_run_is_a_parallel_run_not_one_of_its_lanes(root: Path) -> None:
    """Lanes are newer than their parallel run and share its project: a bare
    ``pause``/``stop``/``status`` there means the parallel run, so it reaches every lane."""
    parent = make_run(root, "alpha-1700000010000")
    for number, lane in enumerate(["alpha-lane1-1700000011000", "alpha-lane2-1700000012000"], 1):
        make_run(root, lane)
        state = json.loads((root / lane / "state.json").read_text())
        state["lane"] = {"parent": parent, "number": number}
        (root / lane / "state.json").write_text(json.dumps(state))
    assert resolve_run(root, None, project=Path("/proj/a")) == parent
    assert resolve_run(root, None) == parent
    # A lane whose parallel run's folder is gone is still found.
    (root / parent / "state.json").unlink()
    (root / parent).rmdir()
    assert resolve_run(root, None, project=Path("/proj/a")) == "alpha-lane2-1700000012000"


def test_an_omitted_run_skips_runs_whose_state_cannot_be_read(root: Path) -> None:
    make_run(root, "alpha-1700000003000", None)
    corrupt = make_run(root, "alpha-1700000004000")
    (root / corrupt / "state.json").write_text("{not json")
    assert resolve_run(root, None, project=Path("/proj/a")) == "alpha-1700000002000"


def test_an_omitted_run_whose_state_cannot_be_read_is_found_by_its_log(root: Path) -> None:
    """Its log's ``armed`` event names its project, so a bare ``status`` there names the
    run (and what is wrong with it) instead of saying there is none."""
    run_id = make_run(root, "alpha-1700000004000")
    (root / run_id / "state.json").write_text("[]")
    armed = {"type": "armed", "runId": run_id, "ts": 1, "cwd": "/proj/c"}
    (root / run_id / "events.jsonl").write_text(json.dumps(armed) + "\n")
    assert resolve_run(root, None, project=Path("/proj/c")) == run_id
    assert resolve_run(root, None, project=Path("/proj/a")) == "alpha-1700000002000"


def test_an_omitted_run_with_no_run_of_the_project_is_not_found(root: Path) -> None:
    with pytest.raises(RunNotFoundError, match="no runs for /proj/c"):
        resolve_run(root, None, project=Path("/proj/c"))


def test_an_omitted_run_in_an_empty_root_is_not_found(tmp_path: Path) -> None:
    with pytest.raises(RunNotFoundError, match="no runs in"):
        resolve_run(tmp_path, None)


@pytest.mark.parametrize(
    "odd",
    [
        [],
        ["x"],
        ["a-1796000000000\nb-1796000000001"],  # two good ids in one
        ["a..b-1796000000000"],
        ["a-1796000000000\n"],
        ["", "a-1796000000000"],
        ["-1796000000000"],
    ],
)
def test_run_ids_checked_together_are_those_checked_one_by_one(odd: list[str]) -> None:
    good = [f"proj{n}-{1796000000000 + n}" for n in range(3)]
    for ids in (odd, good + odd, odd + good, good):
        assert valid_run_ids(ids) == [run_id for run_id in ids if is_valid_run_id(run_id)]
