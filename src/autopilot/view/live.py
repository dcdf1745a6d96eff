"""Entry points of the live view: ``watch`` on its own, or beside a driver (``run``).

``run_watch`` shows a run until the user leaves. ``run_live_view`` shows the run
that ``driver_thread`` is driving in this process; when the user leaves the view
before the run ends, plain event lines follow until it does, so the terminal never
goes quiet while work goes on. ``drive_live`` wraps both: it runs a callable (the
driver's ``run``) in a thread with the view in front and returns its result.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import click

from autopilot.loop.clock import Clock
from autopilot.store.paths import run_dir as run_folder
from autopilot.view.follow import StopEvent, follow_plain
from autopilot.view.keys import SendMessage
from autopilot.view.tui import WatchApp

T = TypeVar("T")


def run_watch(
    run_dir: Path, *, clock: Clock | None = None, send_message: SendMessage | None = None
) -> None:
    """Show the live view of the run in ``run_dir`` until the user leaves (``q``).

    Leaving never stops the run.
    """
    WatchApp(run_dir, clock=clock, send_message=send_message).run()


def run_live_view(
    root: Path,
    run_id: str,
    driver_thread: threading.Thread,
    *,
    clock: Clock | None = None,
    on_interrupt: Callable[[], str] | None = None,
    write: Callable[[str], None] = click.echo,
    headless: bool = False,
) -> None:
    """Show the live view of ``run_id`` while ``driver_thread`` drives it here.

    Returns once the driver thread has finished. If the user leaves the view
    (``q``) first, the run goes on and its events are printed one line each
    (``format_event``) until it ends.

    Args:
        root: The runs root.
        run_id: The run being driven.
        driver_thread: The (started) thread running ``Driver.run``.
        clock: The clock the view shows time with.
        on_interrupt: What ctrl+c in the view does; pass the driver's interrupt
            handler (e.g. ``lambda: interrupts.handle(signal.SIGINT, None)`` plus a
            line to show) so ctrl+c means the same as in plain mode.
        write: Where plain lines go after the view is left.
        headless: Run the view without a terminal (for tests).
    """
    from autopilot.loop.clock import SystemClock
    from autopilot.loop.messages import message_sender

    folder = run_folder(root, run_id)
    app = WatchApp(
        folder,
        clock=clock,
        driver_thread=driver_thread,
        on_interrupt=on_interrupt,
        send_message=message_sender(folder, clock or SystemClock()),
    )
    app.run(headless=headless)
    if not driver_thread.is_alive():
        return
    write(f"autopilot: left the live view; run {run_id} goes on (events follow)")
    stop = StopEvent()

    def stop_when_driver_ends() -> None:
        driver_thread.join()
        stop.set()

    threading.Thread(target=stop_when_driver_ends, daemon=True).start()
    follow_plain(folder, write, stop=stop, liveness=lambda *_: None, from_end=True)
    driver_thread.join()


def drive_live(
    drive: Callable[[], T],
    root: Path,
    run_id: str,
    *,
    on_interrupt: Callable[[], str] | None = None,
    clock: Clock | None = None,
    headless: bool = False,
) -> T:
    """Run ``drive`` (e.g. ``Driver(...).run``) in a thread with the live view in front.

    Signal handlers must already be installed by the caller in the main thread
    (``Interrupts.install``); the view passes ctrl+c to ``on_interrupt``.
    ``headless`` runs the view without a terminal (for tests).

    Returns:
        What ``drive`` returned.

    Raises:
        Whatever ``drive`` raised, re-raised in the calling thread.
    """
    outcome: dict[str, T] = {}
    failure: list[BaseException] = []

    def target() -> None:
        try:
            outcome["result"] = drive()
        except BaseException as error:
            failure.append(error)

    thread = threading.Thread(target=target, name=f"autopilot-driver-{run_id}")
    thread.start()
    try:
        run_live_view(
            root, run_id, thread, clock=clock, on_interrupt=on_interrupt, headless=headless
        )
    finally:
        thread.join()
    if failure:
        raise failure[0]
    return outcome["result"]


def stdout_is_terminal() -> bool:
    """True when the live view can be shown (stdout is a terminal)."""
    return sys.stdout.isatty()
