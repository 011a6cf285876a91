"""Huge text fields, kept once: capped copies for trajectories and for what a model reads.

A task row may carry a field of hundreds of megabytes (a pasted log as the problem
statement, a generated test patch).  The task keeps that text once, as it was read; what is
*written* or *sent* elsewhere is capped, never silently:

* a trajectory's copy of the row keeps at most :data:`TRAJECTORY_FIELD_CHARS` characters of
  each string (its head and its tail, with a marker saying how much was cut in between),
  lists what was cut under ``cut``, and names where the whole row is (``origin``: the task
  file and line), which ``replay`` reads again;
* the issue text an agent sends to a model keeps at most :data:`AGENT_TEXT_CHARS`
  characters, the same way, and the agent says so in its trajectory.

Rows whose fields are all under the caps (every published SWE-bench, R2E-Gym and SWE-smith
row) are written as they were read.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "AGENT_TEXT_CHARS",
    "TRAJECTORY_FIELD_CHARS",
    "Cut",
    "cap_text",
    "capped_row",
    "issue_excerpt",
    "origin_reference",
    "trajectory_task",
]

#: Characters of one string a trajectory's copy of a row keeps (half head, half tail).
#: Far above any published row's field, so normal rows are copied whole.
TRAJECTORY_FIELD_CHARS = 1 << 20
#: Characters of the issue an agent sends to a model (half head, half tail): about 25k
#: tokens, a fifth of a 128k context, so the conversation still has room to work.
AGENT_TEXT_CHARS = 100_000

_LINE_LABEL = re.compile(r"^(?P<file>.+):(?P<line>[0-9]+)$")


@dataclass(frozen=True)
class Cut:
    """One string that was cut: where it is in the row, its length, how much was kept."""

    field: str
    chars: int
    kept: int

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (trajectories)."""
        return {"field": self.field, "chars": self.chars, "kept": self.kept}

    def note(self) -> str:
        """One line for a reader: what was cut and how much."""
        return (
            f"{self.field}: {self.chars} characters, cut to its first and last "
            f"{self.kept // 2} ({self.chars - self.kept} cut)"
        )


def _excerpt(text: str, low: int, high: int, limit: int, field: str) -> tuple[str, Cut | None]:
    """``text[low:high]``, or its head and tail around a marker when longer than ``limit``.

    Only what is kept is copied out of ``text``.
    """
    size = high - low
    if size <= limit:
        return text[low:high], None
    head, tail = limit // 2, limit - limit // 2
    marker = (
        f"\n[... {size - limit} characters cut here: {field} is {size} characters long; "
        f"the first {head} and the last {tail} are kept ...]\n"
    )
    return text[low : low + head] + marker + text[high - tail : high], Cut(field, size, limit)


def cap_text(text: str, limit: int, *, field: str) -> tuple[str, Cut | None]:
    """``text`` whole when it fits ``limit``, else its head and tail around a marker.

    The marker says how many characters were cut and how long the whole text is, so a
    reader (or a model) knows it holds an excerpt.
    """
    if len(text) <= limit:
        return text, None  # the same object: nothing copied
    return _excerpt(text, 0, len(text), limit, field)


def issue_excerpt(statement: str, limit: int = AGENT_TEXT_CHARS) -> tuple[str, Cut | None]:
    """The issue as agents hand it to a model, capped to ``limit`` characters.

    The text inside R2E-Gym's ``[ISSUE]...[/ISSUE]`` where the statement has those tags,
    else the whole statement; only the head and tail kept are ever copied out of a huge one.
    """
    start, end = statement.find("[ISSUE]"), statement.rfind("[/ISSUE]")
    if start != -1 and end > start:
        return _excerpt(statement, start + len("[ISSUE]"), end, limit, "the issue")
    return cap_text(statement, limit, field="the issue")


def _cap(value: Any, limit: int, where: str, cuts: list[Cut]) -> Any:
    """``value`` with every string over ``limit`` capped; containers copied only if cut."""
    if isinstance(value, str):
        text, cut = cap_text(value, limit, field=where)
        if cut is not None:
            cuts.append(cut)
        return text
    if isinstance(value, Mapping):
        before = len(cuts)
        items = {
            key: _cap(item, limit, f"{where}.{key}" if where else str(key), cuts)
            for key, item in value.items()
        }
        return items if len(cuts) > before else value
    if isinstance(value, list):
        before = len(cuts)
        elements = [_cap(item, limit, f"{where}[{i}]", cuts) for i, item in enumerate(value)]
        return elements if len(cuts) > before else value
    return value


def capped_row(row: Mapping[str, Any], limit: int) -> tuple[Mapping[str, Any], list[Cut]]:
    """The row with each string (at any depth) capped to ``limit``, and what was cut.

    A row with nothing to cut comes back as the same object: nothing is copied.
    """
    cuts: list[Cut] = []
    return _cap(row, limit, "", cuts), cuts


def origin_reference(origin: str) -> dict[str, Any]:
    """Where a row is, for a reader: ``{file, line}`` (absolute) for ``FILE:LINE``."""
    if not origin:
        return {}
    match = _LINE_LABEL.match(origin)
    if match and Path(match["file"]).is_file():
        return {"file": str(Path(match["file"]).resolve()), "line": int(match["line"])}
    return {"source": origin}


def trajectory_task(
    row_format: str, row: Mapping[str, Any], origin: str, *, limit: int = TRAJECTORY_FIELD_CHARS
) -> dict[str, Any]:
    """A trajectory's ``task`` entry: the row (capped), what was cut, where the row is."""
    kept, cuts = capped_row(row, limit)
    entry: dict[str, Any] = {"format": row_format, "row": kept}
    reference = origin_reference(origin)
    if reference:
        entry["origin"] = reference
    if cuts:
        entry["cut"] = [cut.to_dict() for cut in cuts]
    return entry
