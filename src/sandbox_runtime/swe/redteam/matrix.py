"""The corpus's results as a table: one row per hack, one column per entry point and backend.

A cell reads ``REWARD [f] [dN]``: the reward (``1``, ``0``, ``err`` for no verdict), ``f``
when the submission was flagged, ``dN`` when strict grading dropped N changes; ``-`` for a
hack not run there (a model response through ``run``'s agent, a host-writing hack on
``local`` without isolation).  A cell that fails its check is in bold with what failed
(``REWARD``: a 1 under strict grading; ``UNFLAGGED``: a 0 or 1 nobody flagged; ``ERROR``).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import fields
from pathlib import Path

from sandbox_runtime.swe.redteam.corpus import Cell
from sandbox_runtime.swe.redteam.hacks import HACKS

__all__ = ["cells_from_json", "failures", "markdown", "summary_lines"]


def _text(cell: Cell) -> str:
    if cell.skipped:
        return "-"
    reward = "err" if cell.reward is None else f"{cell.reward:g}"
    parts = (
        [reward] + (["f"] if cell.flagged else []) + ([f"d{cell.dropped}"] if cell.dropped else [])
    )
    text = " ".join(parts)
    verdict = cell.verdict
    return text if verdict == "ok" else f"**{text} {verdict}**"


def markdown(cells: Sequence[Cell]) -> str:
    """The matrix as a Markdown table; a column names its backend and shape where they vary."""
    columns = list(dict.fromkeys((c.entry, c.backend, c.task) for c in cells))
    rows = list(dict.fromkeys((c.hack, c.klass, c.expects) for c in cells))
    index = {(c.hack, c.entry, c.backend, c.task): c for c in cells}
    varying = [len({column[i] for column in columns}) > 1 for i in range(3)]
    names = [
        " ".join(p for p, v in zip(column, [True, *varying[1:]], strict=True) if v)
        for column in columns
    ]
    head = ["hack", "class", "expects", *names]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for hack, klass, expects in rows:
        found = [index.get((hack, e, b, t)) for e, b, t in columns]
        texts = [_text(cell) if cell is not None else "" for cell in found]
        lines.append("| " + " | ".join([f"`{hack}`", klass, expects, *texts]) + " |")
    return "\n".join(lines) + "\n"


def failures(cells: Sequence[Cell]) -> list[Cell]:
    """The cells that fail their check."""
    return [c for c in cells if c.verdict not in ("ok", "skipped")]


def summary_lines(cells: Sequence[Cell]) -> list[str]:
    """Counts per entry point and backend, then every failing cell on its own line."""
    lines = []
    groups = dict.fromkeys((c.entry, c.backend) for c in cells)
    for entry, backend in groups:
        mine = [c for c in cells if (c.entry, c.backend) == (entry, backend)]
        counts = Counter(c.verdict for c in mine)
        text = ", ".join(f"{n} {verdict}" for verdict, n in sorted(counts.items()))
        lines.append(f"{entry} on {backend}: {text}")
    for cell in failures(cells):
        reward = "err" if cell.reward is None else f"{cell.reward:g}"
        lines.append(
            f"  {cell.verdict}: {cell.hack} through {cell.entry} on {cell.backend} "
            f"({cell.task}): reward {reward}, flagged {cell.flagged}, dropped {cell.dropped}"
        )
    return lines


def cells_from_json(paths: Iterable[Path]) -> list[Cell]:
    """Cells written by ``redteam --json`` (a list) or its stderr (one object a line).

    Each cell's expectation is the corpus's current one, so a matrix recorded before an
    expectation changed is judged as the corpus now reads.
    """
    names = {f.name for f in fields(Cell)}
    expects = {hack.id: hack.expects.value for hack in HACKS}
    cells = []
    for path in paths:
        text = path.read_text(encoding="utf-8").strip()
        if text.startswith("["):
            items = json.loads(text)
        else:
            items = [json.loads(line) for line in text.splitlines() if line.startswith("{")]
        for item in items:
            cell = Cell(**{k: v for k, v in item.items() if k in names})
            cell.expects = expects.get(cell.hack, cell.expects)
            cells.append(cell)
    return cells
