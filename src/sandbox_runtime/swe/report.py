"""What a run leaves behind: per-task outcomes, the summary table, the JSON report, trajectories.

* The **report** (``--report``) is one JSON document: the run's settings, a summary, and one
  short entry per task (reward, reason, steps, timings, where it was graded, tamper flags),
  without long outputs.
* The **trajectories** (``--trajectories``) are JSONL, one record per task, written as each
  task finishes: the agent's actions with their commands and outputs, the patch, the test
  output and parsed statuses, the reward and the timings, and the task's row (what
  ``sandbox-runtime replay`` grades again).
* The **smoke report** is the single-task shape of Graph Planner's ``run_rule_agent.py``:
  ``{reward, done, steps, trajectory: [{step, phase, action, info}], last_info, tests, patch}``.

No secret is ever part of an outcome: agents hold keys, outcomes hold what agents did.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from sandbox_runtime._core.usage import SandboxUsage
from sandbox_runtime.swe.agents.base import Step
from sandbox_runtime.swe.grading import GradeResult
from sandbox_runtime.swe.outcome_record import SUSPECT_STATES
from sandbox_runtime.swe.tamper import TamperFlag

__all__ = ["TaskOutcome", "smoke_report", "summary_table", "write_report", "write_trajectory"]


@dataclass
class TaskOutcome:
    """Everything known about one task's attempt."""

    task_id: str
    format: str
    repo: str
    backend: str
    agent: str
    reward: float | None = None
    """1 or 0 from the task's tests; ``None`` when the task ended in an error (see
    :class:`~sandbox_runtime.swe.grading.Outcome`): never a 0 that the tests did not give."""
    reason: str = ""
    submitted: bool = False
    stop_reason: str = ""
    error: str | None = None
    patch: str = ""
    steps: list[Step] = field(default_factory=list)
    grade: GradeResult | None = None
    sandbox_id: str = ""
    timings: dict[str, float] = field(default_factory=dict)
    usage: dict[str, int] = field(default_factory=dict)
    attempts: list[str] = field(default_factory=list)
    """With ``--retries``: why each attempt ended (the earlier ones' errors, then the last
    one's reason); empty when the first attempt counted."""
    grade_in: str = ""
    """``same`` or ``fresh``: where the tests ran (:mod:`sandbox_runtime.swe.isolation`)."""
    grading: str = "benchmark"
    """``benchmark`` or ``strict`` (:mod:`sandbox_runtime.swe.strict`)."""
    dropped: list[dict[str, str]] = field(default_factory=list)
    """Under strict grading, the files whose change was kept from the tests (``{path, why}``)."""
    tamper: list[TamperFlag] = field(default_factory=list)
    """What the agent changed that grading reads (:mod:`sandbox_runtime.swe.tamper`); the
    reward is the tests' verdict either way."""
    task_row: dict[str, Any] = field(default_factory=dict)
    """``{"format": ..., "row": ...}``: the task as read, so ``replay`` can grade it again."""
    accounting: SandboxUsage = field(default_factory=SandboxUsage)
    """What the task's sandboxes used (the agent's, a fresh grading one, earlier attempts')."""
    agent_accounting: SandboxUsage = field(default_factory=SandboxUsage)
    """The agent's share: its commands and bytes, between setup and grading."""
    price: float | None = None
    """Price per sandbox-second, for the estimated cost (``None``: no estimate)."""
    notes: list[str] = field(default_factory=list)
    """The agent's notes for a reader (e.g. that the issue the model got was cut)."""
    rollout: int | None = None
    """With ``run --group N``: this rollout's index in its task's group (0 to N-1)."""
    group_mode: str = ""
    """With ``run --group N``: ``fork`` (the rollouts are copies of one prepared sandbox) or
    ``independent`` (the backend cannot fork: each rollout started and set up its own)."""
    setups: int = 0
    """Task setups this outcome paid for (the agent's sandbox, a fresh grading sandbox, earlier
    attempts'); in a forked group the one setup is counted on rollout 0 alone."""

    def accounting_entry(self) -> dict[str, Any]:
        """The accounting as reports show it (see :mod:`sandbox_runtime._core.usage`)."""
        agent = self.agent_accounting
        cost = self.accounting.cost(self.price)
        return {
            **self.accounting.to_dict(),
            "starts": self.accounting.sandboxes - self.accounting.forks,
            "sandbox_wait_seconds": round(self.timings.get("sandbox_wait", 0.0), 3),
            "grading_seconds": round(self.timings.get("grade", 0.0), 3),
            "agent": {
                "commands": agent.commands,
                "command_seconds": round(agent.command_seconds, 3),
                "bytes_up": agent.bytes_up,
                "bytes_down": agent.bytes_down,
            },
            "cost": None if cost is None else round(cost, 6),
        }

    @property
    def flagged(self) -> bool:
        """True when the agent changed what grading reads, or grading caught a forgery.

        A tamper flag (or a change that could not be checked), a refused patch, a tripped
        canary.
        """
        return bool(self.tamper) or (self.grade is not None and self.grade.integrity_flagged)

    @property
    def refused(self) -> str:
        """Why strict grading refused the patch text whole (empty when it did not)."""
        return self.grade.refused if self.grade is not None else ""

    @property
    def canary(self) -> str:
        """The canary's state under strict grading (empty when it did not run)."""
        return self.grade.canary if self.grade is not None else ""

    @property
    def outcome(self) -> str:
        """``resolved``, ``unresolved`` or ``error`` (no reward)."""
        if self.reward is None:
            return "error"
        return "resolved" if self.reward >= 1.0 else "unresolved"

    @property
    def total_time(self) -> float:
        """Seconds from the sandbox's creation to its removal."""
        return self.timings.get("total", 0.0)

    def report_entry(self) -> dict[str, Any]:
        """The task's entry in the JSON report (short: no outputs, no patch text)."""
        return {
            "task_id": self.task_id,
            "format": self.format,
            "repo": self.repo,
            "reward": self.reward,
            "outcome": self.outcome,
            "resolved": self.outcome == "resolved",
            "reason": self.reason,
            "steps": len(self.steps),
            "submitted": self.submitted,
            "stop_reason": self.stop_reason,
            "error": self.error,
            "patch_lines": len(self.patch.splitlines()),
            "timings": {k: round(v, 3) for k, v in self.timings.items()},
            "usage": self.usage,
            "attempts": self.attempts,
            "grade_in": self.grade_in,
            "grading": self.grading,
            "dropped": self.dropped,
            "flagged": self.flagged,
            "refused": self.refused,
            "canary": self.canary,
            "outcome_record": self.grade.outcome_record if self.grade is not None else "",
            "applied_by": self.grade.applied_by if self.grade is not None else "",
            "tamper": [flag.to_dict() for flag in self.tamper],
            "accounting": self.accounting_entry(),
            "setups": self.setups,
            **(
                {"rollout": self.rollout, "group_mode": self.group_mode}
                if self.rollout is not None
                else {}
            ),
        }

    @property
    def label(self) -> str:
        """The task id, with ``#rollout`` in a group: what tables and logs name it by."""
        return self.task_id if self.rollout is None else f"{self.task_id}#{self.rollout}"

    def trajectory(self) -> dict[str, Any]:
        """The task's full trajectory record."""
        grade = self.grade
        return {
            **self.report_entry(),
            "backend": self.backend,
            "agent": self.agent,
            "sandbox_id": self.sandbox_id,
            "notes": self.notes,
            "actions": [step.to_dict() for step in self.steps],
            "patch": self.patch,
            "tests": {
                "output": grade.test_output if grade else "",
                "exit_code": grade.test_exit_code if grade else None,
                "status": grade.status_map if grade else {},
                "parser": grade.parser if grade else "",
                "graded_by": grade.graded_by if grade else "",
                "duration": round(grade.duration, 3) if grade else 0.0,
            },
            "task": self.task_row,
        }


def summary_table(outcomes: list[TaskOutcome], *, width: int = 60) -> str:
    """A plain-text table: task, reward, steps, time, reason; then the totals."""
    header = f"{'task':<36} {'reward':>6} {'steps':>5} {'time':>7}  reason"

    def shown(reward: float | None) -> str:
        return "-" if reward is None else f"{reward:.1f}"

    lines = [header, "-" * len(header)]
    for outcome in outcomes:
        reason = (
            outcome.reason if len(outcome.reason) <= width else outcome.reason[: width - 3] + "..."
        )
        lines.append(
            f"{_short_label(outcome):<36} {shown(outcome.reward):>6} {len(outcome.steps):>5} "
            f"{outcome.total_time:>6.1f}s  {reason}"
        )
    totals = summary(outcomes)
    mean = totals["mean_reward"]
    lines.append("-" * len(header))
    lines.append(
        f"{totals['tasks']} task(s): {totals['resolved']} resolved, {totals['unresolved']} "
        f"unresolved, {totals['errors']} error(s); mean reward "
        + ("-" if mean is None else f"{mean:.3f}")
        + " over the graded ones"
    )
    graded_in = ", ".join(f"{count} {where}" for where, count in totals["grade_in"].items())
    lines.append(
        f"graded in: {graded_in or '-'}; {totals['flagged']} task(s) flagged for changing "
        "what grading reads"
        + (
            f"; strict grading dropped changes of {totals['dropped']} task(s), refused "
            f"{totals['refused']} patch(es), canary tripped by {totals['canary_tripped']}, "
            f"test log forged by {totals['output_forged']}"
            if any(o.grading == "strict" for o in outcomes)
            else ""
        )
    )
    used = totals["accounting"]
    cost = "" if used["cost"] is None else f"; estimated cost {used['cost']:.4f}"
    lines.append(
        f"used: {used['sandbox_seconds']:.1f} sandbox-seconds over {used['sandboxes']} "
        f"sandbox(es) ({used['starts']} started, {used['forks']} forked, {used['pulls']} "
        f"image pull(s), {used['sandbox_wait_seconds']:.1f}s waiting for them), "
        f"{used['commands']} command(s) taking {used['command_seconds']:.1f}s, "
        f"{used['bytes_up']} bytes up, {used['bytes_down']} down, "
        f"{sum(used['retries'].values())} retries, {sum(used['faults'].values())} faults{cost}"
    )
    return "\n".join(lines)


def _short_label(outcome: TaskOutcome, width: int = 36) -> str:
    """The outcome's label cut to ``width``, keeping a rollout's ``#index``."""
    suffix = "" if outcome.rollout is None else f"#{outcome.rollout}"
    return outcome.task_id[: width - len(suffix)] + suffix


def summary(outcomes: list[TaskOutcome]) -> dict[str, Any]:
    """Totals for the report; the mean reward is over graded tasks only (errors have none)."""
    rewards = [o.reward for o in outcomes if o.reward is not None]
    return {
        "tasks": len(outcomes),
        "resolved": sum(1 for o in outcomes if o.outcome == "resolved"),
        "unresolved": sum(1 for o in outcomes if o.outcome == "unresolved"),
        "errors": sum(1 for o in outcomes if o.outcome == "error"),
        "setups": sum(o.setups for o in outcomes),
        "mean_reward": sum(rewards) / len(rewards) if rewards else None,
        "flagged": sum(1 for o in outcomes if o.flagged),
        "dropped": sum(1 for o in outcomes if o.dropped),
        "refused": sum(1 for o in outcomes if o.refused),
        "canary_tripped": sum(1 for o in outcomes if o.canary == "tripped"),
        "output_forged": sum(
            1 for o in outcomes if o.grade is not None and o.grade.outcome_record in SUSPECT_STATES
        ),
        "accounting": run_accounting(outcomes),
        "grade_in": {
            where: sum(1 for o in outcomes if o.grade_in == where)
            for where in sorted({o.grade_in for o in outcomes if o.grade_in})
        },
    }


def run_accounting(outcomes: list[TaskOutcome]) -> dict[str, Any]:
    """The run's totals of every task's accounting, and its estimated cost.

    ``sandboxes`` counts every sandbox started: ``starts`` from an image, ``forks`` from a
    checkpoint; ``pulls`` the image pulls those starts waited for; ``sandbox_wait_seconds``
    the time tasks stood still for their sandboxes to come up (their critical path).
    """
    total = SandboxUsage.total(o.accounting for o in outcomes)
    costs = [o.accounting.cost(o.price) for o in outcomes]
    known = [cost for cost in costs if cost is not None]
    return {
        **total.to_dict(),
        "starts": total.sandboxes - total.forks,
        "sandbox_wait_seconds": round(sum(o.timings.get("sandbox_wait", 0.0) for o in outcomes), 3),
        "grading_seconds": round(sum(o.timings.get("grade", 0.0) for o in outcomes), 3),
        "cost": round(sum(known), 6) if known else None,
    }


def write_report(path: Path, run: dict[str, Any], outcomes: list[TaskOutcome]) -> None:
    """Write the JSON report (atomically: a reader never sees half a file)."""
    document = {**run, "summary": summary(outcomes), "tasks": [o.report_entry() for o in outcomes]}
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    tmp.replace(path)


def write_predictions(path: Path, outcomes: list[TaskOutcome], model: str) -> int:
    """Write the SWE-bench predictions of a run; returns how many tasks were left out.

    One ``{instance_id, model_name_or_path, model_patch}`` per task, as the swebench harness
    reads them (``--predictions_path``): a JSON list for ``.json``, else one object per line.
    A task that ended in an error is left out: its empty or partial patch graded by the
    harness would be a 0 nobody earned.
    """
    kept = [o for o in outcomes if o.outcome != "error"]
    rows = [
        {"instance_id": o.task_id, "model_name_or_path": model, "model_patch": o.patch}
        for o in kept
    ]
    if path.suffix == ".json":
        text = json.dumps(rows, indent=2) + "\n"
    else:
        text = "".join(json.dumps(row) + "\n" for row in rows)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
    return len(outcomes) - len(kept)


def write_trajectory(handle: IO[str], outcome: TaskOutcome) -> None:
    """Append one task's trajectory record and flush it (a crash loses no finished task)."""
    handle.write(json.dumps(outcome.trajectory(), ensure_ascii=False) + "\n")
    handle.flush()


def smoke_report(outcome: TaskOutcome) -> dict[str, Any]:
    """The single-task report in Graph Planner's ``run_rule_agent.py`` shape."""
    trajectory = [
        {
            "step": step.index,
            "phase": step.phase,
            "action": step.action,
            "info": {
                "arguments": step.arguments,
                "output": step.output,
                "exit_code": step.exit_code,
                "duration": round(step.duration, 3),
            },
        }
        for step in outcome.steps
    ]
    grade = outcome.grade
    tests = {
        "passed": outcome.outcome == "resolved",
        "rc": grade.test_exit_code if grade else None,
        "stdout": grade.test_output if grade else "",
        "status": grade.status_map if grade else {},
    }
    return {
        "task_id": outcome.task_id,
        "reward": outcome.reward,
        "done": outcome.submitted or bool(outcome.stop_reason),
        "steps": len(outcome.steps),
        "trajectory": trajectory,
        "last_info": {
            "reason": outcome.reason,
            "stop_reason": outcome.stop_reason,
            "error": outcome.error,
        },
        "tests": tests,
        "patch": outcome.patch,
    }
