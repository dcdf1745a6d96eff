"""The live view's dialogs: confirm a stop, write a message for the agent."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Static


class ConfirmStop(ModalScreen[bool]):
    """Asks before stopping the run."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "answer(True)", "Stop the run"),
        Binding("n,escape", "answer(False)", "Keep it running"),
    ]
    DEFAULT_CSS = """
    ConfirmStop { align: center middle; }
    ConfirmStop > Vertical {
        width: 64; height: auto; padding: 1 2; border: thick $error; background: $surface;
    }
    """

    def __init__(self, run_id: str) -> None:
        super().__init__()
        self.run_id = run_id

    def compose(self) -> ComposeResult:
        """The question and the two answers."""
        with Vertical():
            yield Static(Text(f"Stop run {self.run_id}?", style="bold"))
            yield Static("It stops at the next iteration boundary; the agent is not killed.")
            yield Static(Text("y  stop    n  keep it running", style="dim"))

    def action_answer(self, stop: bool) -> None:
        """Close with the answer."""
        self.dismiss(stop)


class MessagePrompt(ModalScreen[str | None]):
    """Asks for a message to send to the agent."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Cancel")]
    DEFAULT_CSS = """
    MessagePrompt { align: center middle; }
    MessagePrompt > Vertical {
        width: 80; height: auto; padding: 1 2; border: thick $primary; background: $surface;
    }
    """

    def compose(self) -> ComposeResult:
        """A one-line input."""
        with Vertical():
            yield Static("Message for the agent (delivered at its next chance; enter sends):")
            yield Input(placeholder="message")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        """Send what was typed (nothing when empty)."""
        self.dismiss(event.value.strip() or None)

    def action_cancel(self) -> None:
        """Close without sending."""
        self.dismiss(None)
