"""Loading modules with Python's cyclic garbage collector off.

Importing a command's modules makes tens of thousands of objects (classes, functions,
dataclasses' generated methods) that live as long as the process; each 700 new
objects start a collection that walks them all to free nothing. A run's driver
spent some 7 ms of its start in 40 such collections. Once the modules are loaded,
what exists then is set aside for good (``gc.freeze``: later collections never walk
it, and it is not walked now) and collection resumes as it was, so a long-lived
process (a driver, the live view, a supervisor) frees its later cycles as usual.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def collector_off() -> Iterator[None]:
    """The collector off inside the block; after it (also after an error) every
    object there is is frozen and the collector is as it was."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if was_on:
            gc.enable()
