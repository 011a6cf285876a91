"""Read what a run left behind into the page's data: report, trajectories, replay, training.

The page is built from files a run already writes (:mod:`sandbox_runtime.swe.report`,
:mod:`sandbox_runtime.swe.replay`, ``benchmarks/bench_training.py``), joined per task here
so the browser only filters and draws.  Bad input is a one-line :class:`ConfigError` naming
the file, the line and the field, like every other reader of this project.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sandbox_runtime.errors import ConfigError
from sandbox_runtime.swe.replay import trajectory_records

__all__ = ["error_cause", "load_replay", "load_run", "load_training", "task_key"]

#: Errors raised by the sandbox layer when the machinery, not the task, failed
#: (:mod:`sandbox_runtime.errors`): an error of one of these is an infrastructure fault.
_INFRASTRUCTURE = (
    "BackendUnavailableError",
    "SandboxStartError",
    "QuotaExceededError",
    "ImagePullError",
    "SandboxGoneError",
    "SandboxClosedError",
    "SandboxTimeoutError",
    "LifetimeCapError",
    "BackendError",
)


def error_cause(entry: Mapping[str, Any]) -> str:
    """Why a task has no reward, in the words of the filters; ``""`` for a graded task.

    ``infrastructure`` (the sandbox or backend failed), ``tests timed out``, ``test harness``
    (the tests gave no verdict), ``agent`` (the agent crashed), ``cancelled``, else ``task``
    (the task itself could not be set up or read).
    """
    if entry.get("reward") is not None:
        return ""
    text = f"{entry.get('reason') or ''} {entry.get('error') or ''}"
    if "cancelled" in text:
        return "cancelled"
    if "infrastructure error" in text or any(name in text for name in _INFRASTRUCTURE):
        return "infrastructure"
    if "group setup" in text or entry.get("accounting", {}).get("faults"):
        return "infrastructure"
    if "timed out" in text:
        return "tests timed out"
    if "test error" in text:
        return "test harness"
    if "agent error" in text:
        return "agent"
    return "task"


def task_key(entry: Mapping[str, Any]) -> str:
    """The task's label: its id, with ``#rollout`` in a group run."""
    rollout = entry.get("rollout")
    return str(entry.get("task_id")) + ("" if rollout is None else f"#{rollout}")


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}:{exc.lineno}: not JSON: {exc.msg}") from exc


def _trajectories(path: Path) -> dict[str, dict[str, Any]]:
    """The run's trajectory records by task and rollout (a group's copies apart)."""
    return {task_key(record): record for record in trajectory_records(path)}


def load_run(report: Path, trajectories: Path | None = None) -> dict[str, Any]:
    """One run for the page: its settings, summary and tasks (with trajectories joined).

    ``trajectories``: the run's ``--trajectories`` file; tasks without a record still show
    their report entry (a run that was interrupted, or written without trajectories).
    """
    document = _read_json(report)
    if not isinstance(document, dict) or not isinstance(document.get("tasks"), list):
        raise ConfigError(f"{report}: not a run report (no 'tasks' list)")
    records = _trajectories(trajectories) if trajectories else {}
    tasks = []
    for index, entry in enumerate(document["tasks"]):
        if not isinstance(entry, dict) or "task_id" not in entry:
            raise ConfigError(f"{report}: tasks[{index}]: an entry needs 'task_id'")
        key = task_key(entry)
        merged = {**entry, **records.get(key, {})}
        merged["key"] = key
        merged["cause"] = error_cause(merged)
        merged["has_trajectory"] = key in records
        tasks.append(merged)
    settings = {k: v for k, v in document.items() if k not in ("tasks", "summary")}
    return {
        "name": report.name,
        "settings": settings,
        "summary": document.get("summary", {}),
        "tasks": tasks,
    }


def load_replay(path: Path) -> dict[str, dict[str, Any]]:
    """A ``replay --report`` file, by task id: the replayed verdict beside the recorded one."""
    document = _read_json(path)
    if not isinstance(document, dict) or not isinstance(document.get("records"), list):
        raise ConfigError(f"{path}: not a replay report (no 'records' list)")
    return {str(record.get("task_id")): record for record in document["records"]}


def load_training(path: Path) -> list[dict[str, Any]]:
    """Per-step series of a training run, as plots: ``[{title, unit, series: {name: [..]}}]``.

    Reads ``benchmarks/bench_training.py --json`` (each engine's modes with ``step_waits``:
    the sandbox wait on each step's critical path), or a JSON list of per-step records
    ``{"step", "reward", "reward_lost", "sandbox_wait"}`` that a trainer writes.
    """
    document = _read_json(path)
    if isinstance(document, dict) and isinstance(document.get("engines"), dict):
        waits: dict[str, list[float]] = {}
        for engine, result in document["engines"].items():
            for mode in result.get("modes", []):
                waits[f"{engine} / {mode.get('mode')}"] = list(mode.get("step_waits", []))
        return [{"title": "sandbox wait on the critical path", "unit": "s", "series": waits}]
    if isinstance(document, list):
        plots = []
        for field, title, unit in (
            ("reward", "mean reward", ""),
            ("reward_lost", "reward lost to infrastructure", ""),
            ("sandbox_wait", "sandbox wait on the critical path", "s"),
        ):
            values = [row.get(field) for row in document if isinstance(row, dict)]
            if any(value is not None for value in values):
                plots.append({"title": title, "unit": unit, "series": {field: values}})
        return plots
    raise ConfigError(f"{path}: not training figures (no 'engines', not a list of steps)")
