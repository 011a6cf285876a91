"""This library's R2E-Gym-compatible tools against R2E-Gym's real ones, on the bundled R2E rows.

CI cannot reach GitHub, and R2E-Gym is not on PyPI, so R2E-Gym's tool scripts are not here:
the comparison is against ``tests/fixtures/r2egym_tools_observations.json``, what R2E-Gym
0d94c4e's own scripts answered to one fixed episode per row (its ``source`` says how it was
made; ``tests/integrations/r2e_recording.py`` makes it again).  Where R2E-Gym's ``src`` is
given (``SANDBOX_RUNTIME_R2EGYM_SRC``), the recording itself is checked against the real
scripts, live, on ``local`` with ``isolation="namespace"``.

What the comparison shows (#19 item 2): the rewards are the same on every row, and so are
the observations of ``execute_bash``, ``finish`` and a search in one file, byte for byte.
The search of a directory, a search with no match and every ``file_editor`` answer are worded
differently by this library's tools (``_WORDED_DIFFERENTLY``): an R2E-Gym-trained policy sees
other text there.  The test pins that list, so the gap can neither grow nor close unnoticed.
"""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

from tests.conftest import bwrap_problem, require
from tests.integrations.r2e_recording import RECORDING, bundled_r2e_tasks, play

#: The kinds of step whose observation this library's tools word differently from R2E-Gym's.
_WORDED_DIFFERENTLY: set[str] = set()


def _recorded() -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = json.loads(RECORDING.read_text(encoding="utf-8"))["rows"]
    return rows


def test_the_recording_covers_every_bundled_r2e_row_with_a_reward_of_1() -> None:
    rows = _recorded()
    assert [row["task_id"] for row in rows] == [task.task_id for task in bundled_r2e_tasks()]
    assert [row["reward"] for row in rows] == [1.0] * len(rows)
    assert "R2E-Gym 0d94c4e" in json.loads(RECORDING.read_text(encoding="utf-8"))["source"]


def test_builtin_tools_give_r2e_gyms_rewards_and_observations() -> None:
    require(bwrap_problem())
    differing: dict[str, str] = {}
    compared = 0
    for task, recorded in zip(bundled_r2e_tasks(), _recorded(), strict=True):
        ours = play(task, tools="builtin")
        assert ours["reward"] == recorded["reward"], task.task_id
        for mine, theirs in zip(ours["steps"], recorded["steps"], strict=True):
            assert mine["action"] == theirs["action"]
            compared += 1
            if mine["observation"] != theirs["observation"]:
                differing.setdefault(
                    theirs["kind"],
                    f"{task.task_id}: ours {mine['observation']!r}\n"
                    f"R2E-Gym's {theirs['observation']!r}",
                )
    assert compared == sum(len(row["steps"]) for row in _recorded())
    assert set(differing) == _WORDED_DIFFERENTLY, "\n\n".join(differing.values())


@pytest.mark.skipif(
    not os.environ.get("SANDBOX_RUNTIME_R2EGYM_SRC"),
    reason="R2E-Gym's src (SANDBOX_RUNTIME_R2EGYM_SRC) is needed to check the recording live",
)
def test_the_recording_is_what_r2e_gyms_own_tools_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    require(bwrap_problem())
    monkeypatch.syspath_prepend(os.environ["SANDBOX_RUNTIME_R2EGYM_SRC"])
    try:
        for task, recorded in zip(bundled_r2e_tasks(), _recorded(), strict=True):
            assert play(task, tools="r2egym") == recorded, task.task_id
    finally:
        for name in [m for m in sys.modules if m == "r2egym" or m.startswith("r2egym.")]:
            del sys.modules[name]
