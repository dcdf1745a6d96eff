"""Reading thousands of runs without the cyclic garbage collector.

``list`` and ``stats`` decode a row and a cache entry for every run (tens of thousands
of dicts and lists, none of them in a reference cycle), so the collector's passes over
everything allocated find nothing to free and cost about a fifth of the command.
``CollectorOff`` switches it off for the ``with`` block and back on after, if
it was on.

Loading a command's modules is the same (``cli.main``, ``launch``): tens of thousands
of objects that live as long as the process, each 700 new ones starting a pass that
frees nothing (some 40 passes, about 7 ms of a run's start). ``CollectorOff(freeze=True)``
then sets aside what exists at the block's end for good (``gc.freeze``: no later
pass walks it, and none walks it now), so a long-lived process (a driver, the live
view, a supervisor) goes on freeing its later cycles as usual.
"""

from __future__ import annotations

import gc

TYPE_CHECKING = False  # as typing's, without importing typing at run time
if TYPE_CHECKING:
    from types import TracebackType


class CollectorOff:
    """``with CollectorOff():`` runs its block with ``gc`` disabled; with ``freeze``,
    every object there is at its end (also after an error) is frozen first."""

    def __init__(self, *, freeze: bool = False) -> None:
        self._freeze = freeze

    def __enter__(self) -> None:
        self._was_on = gc.isenabled()
        gc.disable()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        if self._freeze:
            gc.freeze()
        if self._was_on:
            gc.enable()


_KEPT_CALLS = 4
_kept: list[tuple[object, ...]] = []
"""What the last ``_KEPT_CALLS`` calls of ``keep_until_exit`` were given."""


def keep_until_exit(*objects: object) -> None:
    """Leave ``objects`` (what thousands of runs were read into) to the end of the
    process rather than freeing them object by object when the command returns (about
    a twentieth of ``list`` over 10,000 runs): a fast command's process ends without
    tearing anything down (``launch._end_without_teardown``). Only the last few calls'
    objects are kept, so a process that lists again and again holds a few listings."""
    _kept.append(objects)
    del _kept[:-_KEPT_CALLS]
