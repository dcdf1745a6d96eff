"""``CollectorOff(freeze=True)``: a command's modules loaded with the cyclic collector
off, then set aside."""

from __future__ import annotations

import gc

import pytest

from autopilot.store.bulk import CollectorOff


@pytest.fixture(autouse=True)
def _collector_as_it_was() -> object:
    was_on = gc.isenabled()
    yield
    gc.unfreeze()  # what a test froze goes back to the collector
    if was_on:
        gc.enable()
    else:
        gc.disable()


@pytest.mark.parametrize("was_on", [True, False])
def test_the_collector_is_off_inside_and_as_it_was_after(was_on: bool) -> None:
    if was_on:
        gc.enable()
    else:
        gc.disable()
    with CollectorOff(freeze=True):
        assert not gc.isenabled()
        loaded = [[n] for n in range(1000)]  # what a module load leaves behind
    assert gc.isenabled() is was_on
    assert gc.get_freeze_count() >= len(loaded)  # set aside, never walked again


def test_an_error_inside_leaves_the_collector_as_it_was() -> None:
    gc.enable()
    with pytest.raises(ImportError), CollectorOff(freeze=True):
        raise ImportError("no such module")
    assert gc.isenabled()


def test_cycles_made_later_are_still_freed() -> None:
    with CollectorOff(freeze=True):
        pass

    class Node:
        def __init__(self) -> None:
            self.me = self

    Node()
    assert gc.collect() > 0
