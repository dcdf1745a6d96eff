"""``list`` and ``stats`` run without the cycle collector, and leave it as they found it."""

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
