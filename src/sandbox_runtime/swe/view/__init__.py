"""A run as a page: ``sandbox-runtime view report.json [--html out.html | --serve]``.

The report, its trajectories, a replay report and a training run's per-step figures are
joined here into one JSON document (:func:`page_data`), which a small hand-written script
in this package (``assets/view.js``) draws: a summary, a filterable table of tasks, each
task's transcript, grading, flags and timeline, a group's rollouts side by side, two runs
compared, training plots.  The page needs no server, no network and nothing outside this
package; :mod:`._serve` serves the same page with the data beside it for runs too large to
inline.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sandbox_runtime.swe.view._compare import compare_runs
from sandbox_runtime.swe.view._html import data_json, render_page
from sandbox_runtime.swe.view._load import error_cause, load_replay, load_run, load_training

__all__ = [
    "compare_runs",
    "data_json",
    "error_cause",
    "page_data",
    "render_page",
    "write_page",
]


def _trajectories_beside(report: Path) -> Path | None:
    """The run's trajectories when the report names them or they lie beside it by name."""
    for candidate in (report.with_suffix(".jsonl"), report.with_name("trajectories.jsonl")):
        if candidate.is_file():
            return candidate
    return None


def page_data(
    reports: list[Path],
    *,
    trajectories: list[Path | None] | None = None,
    replay: Path | None = None,
    training: Path | None = None,
) -> dict[str, Any]:
    """Everything the page shows, as JSON-ready data.

    ``reports``: one run, or two to compare (the second is the one the table shows).
    ``trajectories``: each report's ``--trajectories`` file, ``None`` to look beside it.
    """
    if not 1 <= len(reports) <= 2:
        raise ValueError("view takes one report, or two to compare")
    paths = list(trajectories or [None] * len(reports))
    runs = [
        load_run(report, path or _trajectories_beside(report))
        for report, path in zip(reports, paths, strict=True)
    ]
    return {
        "runs": runs,
        "compare": compare_runs(runs[0], runs[1]) if len(runs) == 2 else None,
        "replay": load_replay(replay) if replay else None,
        "training": load_training(training) if training else None,
    }


def write_page(data: dict[str, Any], out: Path) -> None:
    """Write the self-contained page (atomically: a browser never reads half of it)."""
    names = " vs ".join(run["name"] for run in data["runs"])
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(render_page(data, title=f"sandbox-runtime: {names}"), encoding="utf-8")
    tmp.replace(out)
