"""This library's R2E-Gym-compatible tools against R2E-Gym's real ones, on the bundled R2E rows.

CI cannot reach GitHub, and R2E-Gym is not on PyPI, so R2E-Gym's tool scripts are not here:
the comparison is against ``tests/fixtures/r2egym_tools_observations.json``, what R2E-Gym
0d94c4e's own scripts answered to one fixed episode per row (its ``source`` says how it was
made; ``tests/integrations/r2e_recording.py`` makes it again).  Where R2E-Gym's ``src`` is
given (``SANDBOX_RUNTIME_R2EGYM_SRC``), the recording itself is checked against the real
scripts, live, on ``local`` with ``isolation="namespace"``::

    SANDBOX_RUNTIME_R2EGYM_SRC=/path/to/R2E-Gym/src PYTHONPATH=src:. \\
        python -m pytest tests/integrations/test_r2egym_observations.py

What the comparison shows (#19 item 2): the rewards are the same on every row, and so is
every observation, byte for byte: ``execute_bash``, ``finish``, every ``search`` (in a
directory, in a file, no match, a missing path, too many files) and every ``file_editor``
answer (views of directories, files, ranges and condensed long files; ``create``,
``str_replace``, ``insert``, ``undo_edit`` and their refusals), 54 steps of every kind on
each of the five rows.  So a training venv without R2E-Gym gives a policy trained on R2E-Gym
the text it was trained on.

One thing is the file system's, not the tools': listings (a directory's ``view``, a search
under a directory) come in the order the file system returns names, for R2E-Gym's scripts
as for ours.  Each recorded row keeps that order for 16 fresh names (``readdir_order``);
where the replay's file system orders them the same way (the machine that made the
recording), every step must match byte for byte; where it orders them otherwise (another
file system, another hash seed), a listing must hold the same lines, in any order.
"""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

from tests.conftest import bwrap_problem, require
from tests.integrations.r2e_recording import RECORDING, bundled_r2e_tasks, play

#: Step kinds whose observation lists entries in the file system's order.
_LISTINGS = {
    "search directory",
    "search nested",
    "search relative",
    "view directory",
    "view directory hidden",
    "view directory relative",
}


def _recorded() -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = json.loads(RECORDING.read_text(encoding="utf-8"))["rows"]
    return rows


def _mismatches(played: dict[str, Any], recorded: dict[str, Any]) -> dict[str, str]:
    """The steps of ``played`` whose observation is not ``recorded``'s, by kind."""
    same_order = played["readdir_order"] == recorded["readdir_order"]
    differing: dict[str, str] = {}
    for mine, theirs in zip(played["steps"], recorded["steps"], strict=True):
        assert mine["action"] == theirs["action"]
        ours, r2e = mine["observation"], theirs["observation"]
        if ours == r2e:
            continue
        listing = not same_order and theirs["kind"] in _LISTINGS
        if listing and sorted(ours.split("\n")) == sorted(r2e.split("\n")):
            continue
        differing.setdefault(
            theirs["kind"], f"{recorded['task_id']}: ours {ours!r}\nR2E-Gym's {r2e!r}"
        )
    return differing


def test_the_recording_covers_every_bundled_r2e_row_with_a_reward_of_1() -> None:
    rows = _recorded()
    assert [row["task_id"] for row in rows] == [task.task_id for task in bundled_r2e_tasks()]
    assert [row["reward"] for row in rows] == [1.0] * len(rows)
    assert "R2E-Gym 0d94c4e" in json.loads(RECORDING.read_text(encoding="utf-8"))["source"]
    kinds = {step["kind"] for step in rows[0]["steps"]}
    assert kinds >= _LISTINGS
    assert {"view condensed", "str_replace multiple", "insert at 0", "undo_edit create"} <= kinds


def test_builtin_tools_give_r2e_gyms_rewards_and_observations() -> None:
    require(bwrap_problem())
    for task, recorded in zip(bundled_r2e_tasks(), _recorded(), strict=True):
        ours = play(task, tools="builtin")
        assert ours["reward"] == recorded["reward"], task.task_id
        differing = _mismatches(ours, recorded)
        assert not differing, "\n\n".join(differing.values())


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
            theirs = play(task, tools="r2egym")
            assert theirs["reward"] == recorded["reward"], task.task_id
            differing = _mismatches(theirs, recorded)
            assert not differing, "\n\n".join(differing.values())
    finally:
        for name in [m for m in sys.modules if m == "r2egym" or m.startswith("r2egym.")]:
            del sys.modules[name]


def test_a_listing_may_differ_in_order_only_where_the_file_system_orders_differently() -> None:
    recorded = _recorded()[0]
    at = next(i for i, s in enumerate(recorded["steps"]) if s["kind"] == "view directory hidden")
    lines = recorded["steps"][at]["observation"].split("\n")
    shuffled = "\n".join(lines[:3] + list(reversed(lines[3:-2])) + lines[-2:])

    def played(observation: str, order: list[str]) -> dict[str, Any]:
        steps = list(recorded["steps"])
        steps[at] = steps[at] | {"observation": observation}
        return recorded | {"steps": steps, "readdir_order": order}

    assert shuffled != recorded["steps"][at]["observation"]
    elsewhere = recorded["readdir_order"][::-1]
    assert _mismatches(played(shuffled, elsewhere), recorded) == {}
    here = recorded["readdir_order"]
    assert set(_mismatches(played(shuffled, here), recorded)) == {"view directory hidden"}
    assert set(_mismatches(played(shuffled + " ", elsewhere), recorded)) == {
        "view directory hidden"
    }
