"""Where an agent's decisions wait for the driver, crash-safe.

``autopilot report`` writes each accepted report as its own file in the run's folder,
``reports/<epoch ms>-<pid>-<n>.json`` (a temp file, fsynced, renamed into place: a
reader sees all of it or nothing). At the iteration's boundary the driver claims
every waiting report by renaming it into ``reports/claimed/`` — a rename either
happened or did not, so after a crash a report is claimed once or is still waiting,
never lost and never applied twice. The claims carry the iteration in the name
(``iter-0003.<name>``), so after a crash between the claim and the item's conclusion
that iteration's claims are put back to wait (``put_back_claimed``) and claimed again
by the conclusion that follows.

A promoted ``.autopilot/consistency-decision.json`` in the work tree is the other way
to decide (see ``core.decision_file``); once read it is renamed to
``consistency-decision.applied.json`` (or ``consistency-decision.rejected.json`` with
the reasons in an event when it is not a valid promoted decision).
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autopilot.core.decision_file import report_from_decision_file
from autopilot.core.item_report import ItemDecision, ItemReport
from autopilot.core.workitems import WorkItem
from autopilot.store.backlog import read_bounded_regular_file

REPORTS_DIR = "reports"
CLAIMED_DIR = "claimed"
DECISION_FILE = Path(".autopilot") / "consistency-decision.json"
APPLIED_DECISION_FILE = Path(".autopilot") / "consistency-decision.applied.json"
REJECTED_DECISION_FILE = Path(".autopilot") / "consistency-decision.rejected.json"
MAX_REPORT_BYTES = 256 * 1024


def report_to_json(report: ItemReport, *, ts_ms: int, iteration: int | None) -> dict[str, Any]:
    """A report as its file holds it."""
    return {
        "itemId": report.item_id,
        "decision": report.decision.value,
        "criteria": {cid: "pass" if ok else "fail" for cid, ok in report.criteria.items()},
        "evidence": list(report.evidence),
        "source": report.source,
        "ts": ts_ms,
        "iteration": iteration,
    }


def report_from_json(data: Any) -> ItemReport | None:
    """A report file's contents back as a report, or None if it is not one."""
    if not isinstance(data, dict):
        return None
    try:
        decision = ItemDecision(str(data.get("decision")))
    except ValueError:
        return None
    criteria = data.get("criteria")
    evidence = data.get("evidence")
    if not isinstance(data.get("itemId"), str) or not isinstance(criteria, dict):
        return None
    if not isinstance(evidence, list) or not all(isinstance(e, str) for e in evidence):
        return None
    if not all(v in ("pass", "fail") for v in criteria.values()):
        return None
    return ItemReport(
        item_id=data["itemId"],
        decision=decision,
        criteria={str(k): v == "pass" for k, v in criteria.items()},
        evidence=tuple(evidence),
        source=str(data.get("source") or "report"),
    )


def write_report(
    run_folder: Path, report: ItemReport, *, ts_ms: int, iteration: int | None
) -> Path:
    """Leave a report for the driver; returns its path.

    Raises:
        OSError: the folder cannot be written.
    """
    folder = run_folder / REPORTS_DIR
    folder.mkdir(mode=0o700, exist_ok=True)
    data = json.dumps(report_to_json(report, ts_ms=ts_ms, iteration=iteration)).encode()
    import tempfile  # only when a report is written

    fd, temp = tempfile.mkstemp(prefix=".report-", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        for attempt in range(1000):
            target = folder / f"{ts_ms:013d}-{os.getpid()}-{attempt}.json"
            if not target.exists():
                os.link(temp, target)  # fails if taken: never overwrites a report
                return target
        raise FileExistsError(f"no free report name in {folder}")
    finally:
        with contextlib.suppress(OSError):
            os.unlink(temp)


@dataclass(frozen=True)
class ClaimedReport:
    """A report the driver took: its file (now under ``claimed/``) and contents."""

    path: Path
    report: ItemReport | None


def _claimed_prefix(iteration: int | None) -> str:
    return "" if iteration is None else f"iter-{iteration:04d}."


def claimed_name(name: str, iteration: int | None) -> str:
    """The name under ``claimed/`` of waiting report ``name`` claimed by ``iteration``."""
    return _claimed_prefix(iteration) + name


def _read_claimed(path: Path) -> ClaimedReport:
    try:
        data = read_bounded_regular_file(path, MAX_REPORT_BYTES)
        report = report_from_json(json.loads(data or b""))
    except (ValueError, OSError, Exception):
        report = None
    return ClaimedReport(path, report)


def claim_reports(run_folder: Path, iteration: int | None = None) -> list[ClaimedReport]:
    """Take every waiting report, oldest first (by name), by renaming it.

    A file that is not a report is claimed too (so it is not read again) with
    ``report`` None.

    Args:
        run_folder: The run's folder.
        iteration: The iteration claiming them (kept in the claimed name), if any.
    """
    folder = run_folder / REPORTS_DIR
    try:
        names = sorted(n for n in os.listdir(folder) if n.endswith(".json"))
    except OSError:
        return []
    claimed_dir = folder / CLAIMED_DIR
    claimed_dir.mkdir(mode=0o700, exist_ok=True)
    claimed: list[ClaimedReport] = []
    for name in names:
        target = claimed_dir / claimed_name(name, iteration)
        try:
            os.rename(folder / name, target)
        except OSError:
            continue  # someone else claimed it
        claimed.append(_read_claimed(target))
    return claimed


def put_back_claimed(
    run_folder: Path, iteration: int, names: Iterable[str] | None = None
) -> list[str]:
    """Put the reports iteration ``iteration`` claimed back to wait, so the next claim
    takes them again: what follows a crash that came after the claim and before the
    item was concluded (a driver or a Stop killed during the checks).

    Args:
        run_folder: The run's folder.
        iteration: The iteration that claimed them.
        names: Only these reports (their waiting names; one claimed without the
            iteration in its name is put back too); None: all that iteration claimed.

    Returns:
        The waiting names of the reports put back, oldest first.
    """
    waiting = run_folder / REPORTS_DIR
    prefix = _claimed_prefix(iteration)
    if names is None:
        try:
            claimed = os.listdir(waiting / CLAIMED_DIR)
        except OSError:
            return []
        names = (n[len(prefix) :] for n in claimed if n.startswith(prefix))
    back: list[str] = []
    for name in sorted(n for n in names if n.endswith(".json") and os.path.basename(n) == n):
        for claimed_as in (claimed_name(name, iteration), name):
            try:
                os.rename(waiting / CLAIMED_DIR / claimed_as, waiting / name)
            except OSError:
                continue
            back.append(name)
            break
    return back


def take_decision_file(
    project: Path, items: list[WorkItem]
) -> tuple[ItemReport | None, list[str]] | None:
    """Read and set aside ``.autopilot/consistency-decision.json``, if there is one.

    Returns:
        None without a file; else ``(report, [])`` for a valid promoted decision
        (the file is renamed to ``consistency-decision.applied.json``) or
        ``(None, problems)`` (renamed to ``consistency-decision.rejected.json``).
    """
    path = project / DECISION_FILE
    try:
        data = read_bounded_regular_file(path, MAX_REPORT_BYTES)
    except Exception as error:
        data = None
        problems = [str(error)]
        result: tuple[ItemReport | None, list[str]] = (None, problems)
    else:
        if data is None:
            return None
        try:
            value = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError) as error:
            result = (None, [f"{DECISION_FILE} is not JSON ({error})"])
        else:
            item_id = value.get("work_item_id") if isinstance(value, dict) else None
            item = next((i for i in items if i.id == item_id), None)
            result = report_from_decision_file(value, item)
    target = project / (APPLIED_DECISION_FILE if result[0] is not None else REJECTED_DECISION_FILE)
    with contextlib.suppress(OSError):
        os.replace(path, target)
    return result
