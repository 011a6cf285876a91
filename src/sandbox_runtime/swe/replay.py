"""Replay: grade a run's trajectories again, each in a fresh sandbox, and compare the rewards.

A trajectory record (``run --trajectories``) carries the task's row, the final patch, the
actions and the reward.  Replaying one opens a new sandbox for the task (on any backend:
record on AGS, replay on Docker), applies the recorded patch (or, with ``actions=True``,
runs the recorded tool calls again in order), grades it by the task's own tests, and
compares the reward with the recorded one.  A disagreement means the recorded reward did not
come from the patch alone: the agent changed something outside its diff (a held-out test, an
installed package) in a sandbox that was graded as it was, the tests are flaky, or the
record was edited.

Replaying is a run (:class:`~sandbox_runtime.swe.runner.Runner`) with an agent that applies
the recorded patch, graded in the replay sandbox, which is fresh and holds only that patch:
parallelism, Ctrl-C, tamper flags and accounting come with it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sandbox_runtime._core.runtime import SandboxRuntime
from sandbox_runtime.errors import ConfigError
from sandbox_runtime.swe.agents.base import Agent, AgentResult, Budget
from sandbox_runtime.swe.agents.simple import apply_reversed
from sandbox_runtime.swe.agents.tools import Observation, ToolBox, ToolCall
from sandbox_runtime.swe.dataset import DatasetError, read_row_at
from sandbox_runtime.swe.report import TaskOutcome
from sandbox_runtime.swe.rows import parse_row
from sandbox_runtime.swe.task import Task, TaskError

__all__ = [
    "RecordedActionsAgent",
    "RecordedPatchAgent",
    "ReplayResult",
    "read_trajectories",
    "replay_agent",
    "replay_results",
    "replay_summary",
    "replay_table",
    "tasks_of",
    "trajectory_records",
]


def read_trajectories(path: Path) -> list[dict[str, Any]]:
    """The records of one run's trajectories file, each task once (:func:`trajectory_records`)."""
    records = trajectory_records(path)
    ids = [record["task_id"] for record in records]
    repeated = sorted({task_id for task_id in ids if ids.count(task_id) > 1})
    if repeated:
        raise ConfigError(
            f"{path}: task(s) recorded more than once ({', '.join(repeated[:5])}); "
            "replay one run's trajectories at a time"
        )
    return records


def trajectory_records(path: Path) -> list[dict[str, Any]]:
    """The records of a trajectories file; a line that is not a JSON object is a ConfigError."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc}") from exc
    records: list[dict[str, Any]] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{path}:{number}: not JSON: {exc.msg}") from None
        if not isinstance(record, dict) or not isinstance(record.get("task_id"), str):
            raise ConfigError(f"{path}:{number}: not a trajectory record (no task_id)")
        records.append(record)
    return records


def _whole_row(embedded: Mapping[str, Any]) -> tuple[dict[str, Any] | None, Path | None]:
    """The row a record's ``task`` entry stands for, and the directory it was read from.

    The row as recorded, or, where the recorded copy was cut, read again from its origin
    (its relative paths then resolve against the origin's directory); ``None`` when it was
    cut and its origin cannot be read.
    """
    row = embedded.get("row")
    if not embedded.get("cut"):
        return (dict(row) if isinstance(row, Mapping) and row else None), None
    origin = embedded.get("origin") or {}
    if not isinstance(origin, Mapping) or not origin.get("file"):
        return None, None
    path = Path(str(origin["file"]))
    try:
        return read_row_at(path, int(origin.get("line") or 0)), path.parent
    except (DatasetError, ValueError):
        return None, None


def _cut_fields(embedded: Mapping[str, Any]) -> str:
    cuts = embedded.get("cut") or []
    return ", ".join(str(cut.get("field")) for cut in cuts if isinstance(cut, Mapping))


def tasks_of(
    records: Sequence[Mapping[str, Any]], known: Mapping[str, Task] | None = None
) -> list[Task]:
    """Each record's task: from its embedded row, else from ``known`` (``--tasks SOURCE``).

    A row whose recorded copy was cut (a huge field, :mod:`sandbox_runtime.swe.bigfields`)
    is taken from ``known``, else read again from the file and line it came from.
    """
    tasks: list[Task] = []
    for index, record in enumerate(records):
        embedded = record.get("task") or {}
        if not isinstance(embedded, Mapping):
            embedded = {}
        task_id = str(record["task_id"])
        cut = bool(embedded.get("cut"))
        row, base_dir = (
            (None, None) if cut and known is not None and task_id in known else _whole_row(embedded)
        )
        if row:
            try:
                task = parse_row(
                    row, index=f"record {index}", format=embedded.get("format"), base_dir=base_dir
                )
            except TaskError as exc:
                raise ConfigError(str(exc)) from exc
        elif known is not None and task_id in known:
            task = known[task_id]
        elif cut:
            raise ConfigError(
                f"record {index} ({task_id}): its row was cut in the trajectory "
                f"({_cut_fields(embedded)}) and its origin {dict(embedded.get('origin') or {})} "
                "cannot be read: give the task source with --tasks SOURCE"
            )
        else:
            raise ConfigError(
                f"record {index} ({task_id}) carries no task row: give the task source with "
                "--tasks SOURCE"
            )
        if task.task_id != task_id:
            raise ConfigError(f"record {index}: its row is task {task.task_id}, not {task_id}")
        tasks.append(task)
    return tasks


class RecordedPatchAgent(Agent):
    """Applies each task's recorded final patch, one step, as the oracle applies the gold one."""

    name = "recorded-patch"

    def __init__(self, patches: Mapping[str, str]) -> None:
        self._patches = dict(patches)

    def run(self, task: Task, sandbox: SandboxRuntime, budget: Budget) -> AgentResult:
        """Apply the patch; one that does not apply is the reward-0 ``patch_error``."""
        result = AgentResult(stop_reason="replayed")
        patch = self._patches.get(task.task_id, "")
        if not patch.strip():
            return result
        applied = sandbox.apply_patch(patch)
        result.record(
            ToolCall("apply_patch", {"source": "recorded patch"}),
            Observation(applied.message, exit_code=0 if applied else 1, error=not applied),
        )
        if not applied:
            result.patch_error = applied.message or "the recorded patch does not apply"
        return result


class RecordedActionsAgent(Agent):
    """Runs each task's recorded actions again, in order: tool calls, and the oracle's patch."""

    name = "recorded-actions"

    def __init__(self, actions: Mapping[str, list[ToolCall]]) -> None:
        self._actions = dict(actions)

    def run(self, task: Task, sandbox: SandboxRuntime, budget: Budget) -> AgentResult:
        """Every recorded call, whatever the step budget (the recording already spent it)."""
        tools = ToolBox(sandbox, timeout=budget.step_timeout)
        result = AgentResult(stop_reason="replayed")
        for call in self._actions.get(task.task_id, []):
            if budget.cancel.is_set():
                result.stop_reason = "cancelled"
                return result
            if call.name == "apply_patch":  # the oracle's step, not a tool
                patch = str(call.arguments.get("patch") or "")
                if call.arguments.get("reverse"):
                    applied, message = apply_reversed(sandbox, patch)
                else:
                    outcome = sandbox.apply_patch(patch)
                    applied, message = outcome.applied, outcome.message
                observation = Observation(message, exit_code=0 if applied else 1)
                if not applied:
                    result.patch_error = message or "the recorded patch does not apply"
            else:
                observation = tools.run(call)
            result.record(call, observation)
            result.submitted = result.submitted or observation.done
        return result


def _recorded_calls(record: Mapping[str, Any]) -> list[ToolCall]:
    calls = []
    for action in record.get("actions") or []:
        if isinstance(action, Mapping) and isinstance(action.get("action"), str):
            calls.append(ToolCall(action["action"], dict(action.get("arguments") or {})))
    return calls


def replay_agent(records: Sequence[Mapping[str, Any]], *, actions: bool) -> Callable[[], Agent]:
    """The agent factory of a replay: the recorded patches, or the recorded tool calls."""
    if actions:
        recorded = {str(record["task_id"]): _recorded_calls(record) for record in records}
        return lambda: RecordedActionsAgent(recorded)
    patches = {str(record["task_id"]): str(record.get("patch") or "") for record in records}
    return lambda: RecordedPatchAgent(patches)


@dataclass
class ReplayResult:
    """One record's recorded and replayed verdicts, and whether they agree."""

    task_id: str
    recorded_reward: float | None
    recorded_reason: str
    replayed: TaskOutcome

    @property
    def status(self) -> str:
        """``agree``, ``disagree``, ``error`` (no replayed reward) or ``skipped``.

        ``skipped``: the record has no reward either (it ended in an error), so there is
        nothing to compare.
        """
        if self.recorded_reward is None:
            return "skipped"
        if self.replayed.reward is None:
            return "error"
        return "agree" if self.replayed.reward == self.recorded_reward else "disagree"

    def to_dict(self) -> dict[str, Any]:
        """The record's entry in the replay report."""
        return {
            "task_id": self.task_id,
            "status": self.status,
            "recorded": {"reward": self.recorded_reward, "reason": self.recorded_reason},
            "replayed": {
                "reward": self.replayed.reward,
                "reason": self.replayed.reason,
                "error": self.replayed.error,
                "sandbox_id": self.replayed.sandbox_id,
                "tamper": [flag.to_dict() for flag in self.replayed.tamper],
                "timings": {k: round(v, 3) for k, v in self.replayed.timings.items()},
                "accounting": self.replayed.accounting_entry(),
            },
        }


def _reward(value: Any) -> float | None:
    return None if value is None else float(value)


def replay_results(
    records: Sequence[Mapping[str, Any]], outcomes: Sequence[TaskOutcome]
) -> list[ReplayResult]:
    """Pair each record with its replayed outcome (both in the records' order)."""
    by_id = {outcome.task_id: outcome for outcome in outcomes}
    return [
        ReplayResult(
            task_id=str(record["task_id"]),
            recorded_reward=_reward(record.get("reward")),
            recorded_reason=str(record.get("reason") or ""),
            replayed=by_id[str(record["task_id"])],
        )
        for record in records
        if str(record["task_id"]) in by_id
    ]


def replay_summary(results: Sequence[ReplayResult]) -> dict[str, int]:
    """How many records agree, disagree, could not be replayed, or had nothing to compare."""
    counts = {"records": len(results), "agree": 0, "disagree": 0, "error": 0, "skipped": 0}
    for result in results:
        counts[result.status] += 1
    return counts


def replay_table(results: Sequence[ReplayResult], *, width: int = 44) -> str:
    """A plain-text table: task, recorded and replayed rewards, status, both reasons."""

    def shown(reward: float | None) -> str:
        return "-" if reward is None else f"{reward:.1f}"

    def cut(text: str) -> str:
        return text if len(text) <= width else text[: width - 3] + "..."

    header = f"{'task':<36} {'recorded':>8} {'replayed':>8}  {'status':<8}  reasons"
    lines = [header, "-" * len(header)]
    for result in results:
        reasons = cut(result.recorded_reason)
        if result.status != "agree":
            reasons += f" | replayed: {cut(result.replayed.reason)}"
        lines.append(
            f"{result.task_id[:36]:<36} {shown(result.recorded_reward):>8} "
            f"{shown(result.replayed.reward):>8}  {result.status:<8}  {reasons}"
        )
    counts = replay_summary(results)
    lines.append("-" * len(header))
    lines.append(
        f"{counts['records']} record(s): {counts['agree']} agree, {counts['disagree']} "
        f"disagree, {counts['error']} could not be replayed, {counts['skipped']} had no "
        "recorded reward"
    )
    return "\n".join(lines)
