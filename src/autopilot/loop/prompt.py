"""The prompt of each iteration: fixed text, or a file re-read every iteration."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from autopilot.errors import UsageError
from autopilot.store.files import read_prompt_file
from autopilot.store.run_state import PromptSource


class PromptReader:
    """Reads the prompt for each iteration (a file can be edited mid-run).

    Args:
        source: Where the prompt comes from.
        project: The work tree (a prompt file inside it is never read through a
            symlink that leads out of it).
        warn: Told when the file is unreadable and the last copy is used.
    """

    def __init__(self, source: PromptSource, project: Path, warn: Callable[[str], None]) -> None:
        self.source = source
        self.project = project
        self._warn = warn
        self._last: str | None = source.text

    def read(self) -> str:
        """The prompt now: only a bounded regular file is read (a FIFO or a link to
        ``/dev/zero`` is refused, and the last copy used).

        Raises:
            UsageError: the file cannot be read and no earlier copy exists.
        """
        path = self.source.path
        if path is None:
            return self.source.text or ""
        try:
            text = read_prompt_file(path, project=self.project)
        except OSError as error:
            if self._last is None:
                raise UsageError(f"cannot read prompt file {path}: {error.strerror}") from None
            self._warn(f"prompt file {path} unreadable ({error.strerror}); using the last copy")
            return self._last
        self._last = text
        return text
