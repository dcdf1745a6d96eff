"""``list`` and ``stats`` run without the cycle collector, and leave it as they found it;
a command's modules load without it, then are frozen."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from autopilot.store.bulk import CollectorOff


@pytest.fixture
def collector_on() -> Iterator[None]:
    was_on = gc.isenabled()
    gc.enable()
    yield
    (gc.enable if was_on else gc.disable)()


def test_the_collector_is_off_inside_and_on_again_after(collector_on: None) -> None:
    with CollectorOff():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_it_is_on_again_after_an_error(collector_on: None) -> None:
    with pytest.raises(ValueError), CollectorOff():
        raise ValueError("boom")
    assert gc.isenabled()


def test_a_collector_already_off_stays_off(collector_on: None) -> None:
    gc.disable()
    with CollectorOff():
        pass
    assert not gc.isenabled()


@pytest.fixture
def thawed() -> Iterator[None]:
    yield
    gc.unfreeze()  # what a test froze goes back to the collector


def test_what_a_command_loaded_is_frozen_and_later_cycles_are_still_freed(
    collector_on: None, thawed: None
) -> None:
    with CollectorOff(freeze=True):
        assert not gc.isenabled()
        loaded = [[n] for n in range(1000)]  # what a module load leaves behind
    assert gc.isenabled()
    assert gc.get_freeze_count() >= len(loaded)  # set aside, never walked again

    class Node:
        def __init__(self) -> None:
            self.me = self

    Node()
    assert gc.collect() > 0


def test_an_error_while_loading_still_freezes_and_turns_it_back_on(
    collector_on: None, thawed: None
) -> None:
    with pytest.raises(ImportError), CollectorOff(freeze=True):
        raise ImportError("no such module")
    assert gc.isenabled()
    assert gc.get_freeze_count() > 0
