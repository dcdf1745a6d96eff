"""The panes of ``autopilot watch``: Textual widgets that render ``present`` values.

Each pane has one ``show(...)`` method taking plain data (``state.json``, the
``Snapshot``, now); none of them reads files or the clock. Every text that comes
from a run (names, notes, excerpts, the agent's output) goes through
``safe.shown``: a terminal never receives a control sequence an agent wrote, nor
a well-known secret.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any, Self

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.events import Resize
from textual.message import Message
from textual.widgets import RichLog, Sparkline, Static

from autopilot.store.snapshot import Snapshot
from autopilot.view import figures, present
from autopilot.view.badge import Badge
from autopilot.view.describe import EVENT_TONES, describe_event
from autopilot.view.output import LineKind, OutputLine
from autopilot.view.plain import format_time
from autopilot.view.safe import shown

TONE_STYLES = {"run": "bold cyan", "ok": "bold green", "warn": "bold yellow", "bad": "bold red"}
MARK_GLYPHS = {
    "done": ("✓", "green"),
    "ok": ("✓", "green"),
    "active": ("●", "bold cyan"),
    "running": ("●", "bold cyan"),
    "fail": ("✗", "red"),
    "skip": ("–", "dim"),
    "todo": ("·", "dim"),
    "ready": ("·", ""),
    "reopened": ("↺", "yellow"),
    "blocked": ("⊘", "red"),
    "completed": ("✓", "green"),
    "stopped": ("■", "dim"),
    "not_applicable": ("–", "dim"),
}


class TextPane(Static):
    """A ``Static`` that redraws only when its text changed (a quiet run costs nothing)."""

    _shown: Text | None = None

    def set_text(self, content: Text, *, layout: bool = True) -> bool:
        """Show ``content``; ``layout=False`` when its size cannot change.

        Returns:
            True if the widget was redrawn.
        """
        if self._shown == content:
            return False
        self._shown = content
        self.update(content, layout=layout)
        return True


SPARK_CELLS = 24
"""Width of the tokens-per-iteration sparkline (as in ``RunHeader``'s CSS)."""

SPARK_LABEL = "tokens/iter"


class RunHeader(Vertical):
    """Run id, label, agent and model, status badge; iteration, elapsed, spend, sparkline.

    Each row is one line whatever the width: text that does not fit ends in ``…``,
    and the sparkline is shown only where it fits beside the counters.
    """

    DEFAULT_CSS = """
    RunHeader { height: 2; background: $boost; }
    RunHeader Horizontal { height: 1; }
    RunHeader #title { width: 1fr; text-wrap: nowrap; text-overflow: ellipsis; }
    RunHeader #badge { width: auto; padding: 0 1; text-style: bold; }
    RunHeader #badge.-run { background: $primary-darken-2; color: $text; }
    RunHeader #badge.-ok { background: $success-darken-2; color: $text; }
    RunHeader #badge.-warn { background: $warning-darken-2; color: $text; }
    RunHeader #badge.-bad { background: $error-darken-2; color: $text; }
    RunHeader #meta { width: 1fr; text-wrap: nowrap; text-overflow: ellipsis; }
    RunHeader #spark-label { width: auto; color: $text-muted; }
    RunHeader Sparkline { width: 24; height: 1; margin: 0 1; }
    """

    _spark_wanted = False
    _meta_cells = 0

    def compose(self) -> ComposeResult:
        """Two rows: identity + badge, then counters + sparkline."""
        with Horizontal():
            yield TextPane(id="title")
            yield TextPane(id="badge")
        with Horizontal():
            yield TextPane(id="meta")
            yield Static(SPARK_LABEL, id="spark-label")
            yield Sparkline([], id="spark")

    def show(
        self,
        state: Mapping[str, Any] | None,
        snapshot: Snapshot,
        badge: Badge,
        now_ms: int,
        note: str | None = None,
    ) -> None:
        """Render the header.

        Args:
            state: ``state.json`` (None when unreadable).
            snapshot: The folded log.
            badge: The status badge.
            now_ms: Now (epoch ms), for the elapsed time.
            note: Shown after the counters (e.g. "reading the log…").
        """
        data = state or {}
        run_id = data.get("runId") or snapshot.runId or "?"
        label = data.get("label") or snapshot.label or "-"
        agent = data.get("agent") or snapshot.agent or "?"
        model = data.get("model") or snapshot.model
        title = Text()
        title.append(" autopilot ", style="bold reverse")
        title.append(f" {shown(str(run_id))} ", style="bold")
        title.append(f" label {shown(str(label))} ", style="dim")
        title.append(
            f" agent {shown(str(agent))}" + (f" ({shown(str(model))})" if model else ""), style=""
        )
        if badge.detail:
            title.append(f"   {shown(badge.detail)}", style="italic")
        self.query_one("#title", TextPane).set_text(title, layout=False)
        badge_widget = self.query_one("#badge", TextPane)
        badge_widget.set_text(Text(shown(badge.label)))
        if not badge_widget.has_class(f"-{badge.tone}"):
            badge_widget.set_classes(f"-{badge.tone}")
        in_tokens, out_tokens, cost = present.spend(state, snapshot)
        meta = Text(" ")
        meta.append(present.iteration_text(state, snapshot), style="bold")
        meta.append(
            f" · elapsed {present.fmt_duration(present.elapsed_ms(state, snapshot, now_ms))}"
        )
        meta.append(
            f" · tokens {figures.fmt_count(in_tokens)} in / {figures.fmt_count(out_tokens)} out"
        )
        meta.append(f" · {figures.fmt_cost(cost)}", style="bold")
        if note:
            meta.append(f" · {note}", style="italic yellow")
        self.query_one("#meta", TextPane).set_text(meta, layout=False)
        self._meta_cells = meta.cell_len
        values = present.tokens_per_iteration(snapshot)[-48:]
        spark = self.query_one("#spark", Sparkline)
        if spark.data != values:
            spark.data = values
        # One value would fill every bar: wait for a second to compare with.
        self._spark_wanted = len(values) >= 2
        self._fit_spark()

    def on_resize(self) -> None:
        """Show the sparkline only where it fits."""
        self._fit_spark()

    def _fit_spark(self) -> None:
        room = self.size.width - self._meta_cells - 1
        visible = self._spark_wanted and room >= SPARK_CELLS + 2 + len(SPARK_LABEL)
        spark = self.query_one("#spark", Sparkline)
        if spark.display != visible:
            spark.display = visible
            self.query_one("#spark-label", Static).display = visible


class StagesRow(TextPane):
    """The stage plan with finished, active and pending stages."""

    DEFAULT_CSS = "StagesRow { height: 1; padding: 0 1; }"

    def show(self, snapshot: Snapshot) -> None:
        """Render the row from ``stage_plan`` / ``stage_start`` / ``stage_end``."""
        marks = present.stage_marks(snapshot)
        text = Text("stages  ", style="bold")
        if not marks:
            text.append("no stage plan reported", style="dim")
        for index, (name, mark) in enumerate(marks):
            if index:
                text.append(" › ", style="dim")
            glyph, style = MARK_GLYPHS[mark]
            text.append(f"{glyph} {shown(name)}", style=style or "")
        self.set_text(text)


def _marked(text: Text, rows: Sequence[tuple[str, str]]) -> None:
    for label, mark in rows:
        glyph, style = MARK_GLYPHS.get(mark, ("·", ""))
        text.append(f"\n  {glyph} ", style=style)
        text.append(shown(label), style="bold" if mark in ("active", "running") else "")


class StagePane(TextPane):
    """The active stage and its substages (tool steps), as many as its height holds."""

    _last: tuple[Snapshot, int] | None = None

    def on_resize(self) -> None:
        """Show again for the new height (the pane may just have appeared)."""
        if self._last is not None:
            self.show(*self._last)

    def show(self, snapshot: Snapshot, now_ms: int) -> None:
        """Render the active stage, its newest substages and recent stages."""
        self._last = (snapshot, now_ms)
        text = Text()
        stage = snapshot.activeStage
        if stage:
            since = (
                present.fmt_duration(now_ms - stage["startedAt"]) if stage.get("startedAt") else ""
            )
            text.append(shown(str(stage["name"])), style="bold cyan")
            text.append(f"  stage {stage['stage']}, {since}", style="dim")
        elif snapshot.recentStages and snapshot.currentStageSubstages:
            text.append(shown(str(snapshot.recentStages[-1].get("name"))), style="bold")
            text.append("  (last stage, ended)", style="dim")
        else:
            text.append("no active stage", style="dim")
        height = max(3, (self.size.height or 8) - 3)
        dropped = snapshot.currentStageSubstagesDropped + max(
            0, len(snapshot.currentStageSubstages) - height
        )
        if dropped:
            text.append(f"\n  (+{dropped} earlier)", style="dim")
        for line in present.substage_lines(snapshot, height):
            text.append(f"\n  · {shown(line)}")
        recent = present.recent_stage_text(snapshot)
        if recent:
            text.append("\ndone  ", style="dim")
            text.append(shown(recent))
        self.set_text(text, layout=False)  # sized by the layout (1fr): a tick only repaints


class WorkPane(TextPane):
    """Work items, backlog counts, the stage's task list and the project's tasks."""

    def show(self, snapshot: Snapshot, project_tasks: Sequence[Mapping[str, Any]]) -> None:
        """Render work items and tasks."""
        text = Text()
        items = present.work_item_lines(snapshot)
        text.append("work items", style="bold")
        if not items:
            text.append("  none reported", style="dim")
        _marked(text, items)
        backlog = (
            present.backlog_counts(snapshot.workItems)
            if snapshot.workItems
            else present.backlog_text(snapshot)
        )
        if backlog:
            text.append(f"\n  backlog: {shown(backlog)}", style="dim")
        tasks = present.task_marks(snapshot)
        if tasks:
            stage = snapshot.currentTaskList["stage"] if snapshot.currentTaskList else ""
            text.append("\ntasks ", style="bold")
            text.append(shown(str(stage)), style="dim")
            _marked(text, tasks)
        if project_tasks and not snapshot.workItems:
            text.append("\ntasks.jsonl ", style="bold")
            text.append(shown(present.task_counts(project_tasks)), style="dim")
            _marked(text, present.project_task_lines(project_tasks))
        self.set_text(text)


class Timeline(RichLog):
    """The event timeline: one line per event, newest at the bottom.

    Lines are cut to the timeline's width; when the width changes (panels beside it
    come or go), they are drawn again for the new width.
    """

    _texts: deque[Text] | None = None
    _width = 0

    def clear(self) -> Self:
        """Remove every line."""
        if self._texts is not None:
            self._texts.clear()
        return super().clear()

    def on_resize(self, event: Resize) -> None:
        """Draw the lines again for a new width."""
        width = event.size.width
        if self._width and width != self._width and self._texts:
            RichLog.clear(self)
            for line in self._texts:
                self.write(line, expand=True, scroll_end=False)
            if self.auto_scroll:
                self.scroll_end(animate=False, immediate=True)
        self._width = width

    def add_events(self, events: Sequence[Mapping[str, Any]]) -> None:
        """Append events as ``HH:MM:SS type summary`` lines."""
        if self._texts is None:
            self._texts = deque(maxlen=self.max_lines)
        for event in events:
            kind = str(event.get("type"))
            line = Text(no_wrap=True, overflow="ellipsis")
            line.append(format_time(event.get("ts"))[:8] + " ", style="dim")
            style = TONE_STYLES.get(EVENT_TONES.get(kind, ""), "")
            line.append(f"{shown(kind):<17}", style=style)
            line.append(" " + shown(describe_event(event)))
            self._texts.append(line)
            # Expanded to the timeline's width: measured alone, a line is capped at
            # the console's width, which may be narrower than the timeline.
            self.write(line, expand=True)


OUTPUT_STYLES = {
    LineKind.TEXT: "",
    LineKind.SUBAGENT: "dim italic",
    LineKind.TOOL: "cyan",
    LineKind.RESULT: "dim",
    LineKind.ERROR: "bold red",
    LineKind.NOTICE: "yellow",
    LineKind.RAW: "",
}


class AgentOutput(RichLog):
    """The live tail of the current iteration's agent output."""

    def clear_output(self, iteration: int | None) -> None:
        """Start over for another iteration."""
        self.clear()
        self.border_title = f"agent output · iteration {iteration}" if iteration else "agent output"
        self.border_subtitle = "no output yet"

    def add_lines(self, lines: Sequence[OutputLine]) -> None:
        """Append rendered output lines."""
        if lines:
            self.border_subtitle = ""
        for item in lines:
            text = Text()
            style = OUTPUT_STYLES[item.kind]
            body = shown(item.text, newlines=True)
            if item.kind is LineKind.TOOL:
                text.append("▸ ", style="cyan")
                text.append(f"{shown(str(item.tool))} ", style="bold cyan")
                text.append(body)
            elif item.kind is LineKind.RESULT:
                text.append("  ↳ " + body, style=style)
            elif item.kind is LineKind.SUBAGENT:
                text.append("  (subagent) " + body, style=style)
            else:
                text.append(body, style=style)
            self.write(text)


class LastCommit(TextPane):
    """The newest commit the run observed."""

    DEFAULT_CSS = "LastCommit { height: 1; padding: 0 1; }"

    def show(self, snapshot: Snapshot) -> None:
        """Render ``last commit a1b2c3d subject (time)``."""
        text = Text("last commit  ", style="bold")
        commit = present.last_commit_text(snapshot)
        text.append(shown(commit) if commit else "none yet", style="" if commit else "dim")
        self.set_text(text)


class FilesChanged(Message):
    """Run files changed (``names``), a quiet period passed (no names), or the
    folder could not be watched (``error``)."""

    def __init__(self, names: frozenset[str], error: str | None = None) -> None:
        super().__init__()
        self.names = names
        self.error = error


class TailLoaded(Message):
    """The last events of the log, for the timeline's first frame."""

    def __init__(self, events: list[dict[str, Any]]) -> None:
        super().__init__()
        self.events = events


class LogFolded(Message):
    """The whole log up to ``offset`` was folded into ``snapshot``."""

    def __init__(self, snapshot: Snapshot, offset: int, inode: int | None) -> None:
        super().__init__()
        self.snapshot = snapshot
        self.offset = offset
        self.inode = inode
