"""Two runs side by side: the tasks whose outcome changed, and why (each side's reason).

Tasks are matched by label (id, and rollout in a group run).  A task in one run only is a
change too (``missing``): a reader comparing two runs must see what one of them skipped.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["compare_runs"]


def _side(task: Mapping[str, Any] | None) -> dict[str, Any]:
    if task is None:
        return {"outcome": "missing", "reward": None, "reason": "", "cause": ""}
    return {
        "outcome": task.get("outcome", ""),
        "reward": task.get("reward"),
        "reason": task.get("reason", ""),
        "cause": task.get("cause", ""),
        "flagged": bool(task.get("flagged")),
    }


def compare_runs(before: Mapping[str, Any], after: Mapping[str, Any]) -> dict[str, Any]:
    """What changed from run ``before`` to run ``after`` (as :func:`load_run` returns them).

    Returns ``{"changed": [{key, before, after}], "same": N, "counts": {"a->b": N}}``: a
    change is a different outcome or, for errors, a different cause.
    """
    old = {task["key"]: task for task in before["tasks"]}
    new = {task["key"]: task for task in after["tasks"]}
    changed = []
    same = 0
    counts: dict[str, int] = {}
    for key in [*old, *(k for k in new if k not in old)]:
        a, b = _side(old.get(key)), _side(new.get(key))
        if (a["outcome"], a["cause"]) == (b["outcome"], b["cause"]):
            same += 1
            continue
        changed.append({"key": key, "before": a, "after": b})
        move = f"{a['outcome']} -> {b['outcome']}"
        counts[move] = counts.get(move, 0) + 1
    return {"changed": changed, "same": same, "counts": dict(sorted(counts.items()))}
