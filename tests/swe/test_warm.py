"""``run --warm N``: tasks take their sandboxes from pools, grade the same, and leave nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from sandbox_runtime.swe import Task
from sandbox_runtime.swe.agents import make_agent
from sandbox_runtime.swe.runner import Runner, RunOptions
from sandbox_runtime.swe.warm import WarmPools, pool_key
from tests.swe.conftest import task_named
from tests.swe.test_cli_run import _check_run, _sandbox_dirs


def _copies(task: Task, count: int) -> list[Task]:
    """The same task under several ids, as an RL trainer runs several rollouts of one task."""
    return [task.model_copy(update={"task_id": f"{task.task_id}-{n}"}) for n in range(count)]


def test_rollouts_of_one_task_share_a_pool(
    bundled_tasks: list[Task], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    task = task_named(bundled_tasks, "csvline", "r2e")
    # The SWE-bench row of the same sample runs in the same image: it shares the pool.
    same_image = task_named(bundled_tasks, "csvline", "swebench")
    elsewhere = next(t for t in bundled_tasks if t.repo != task.repo)
    tasks = [*_copies(task, 4), same_image, elsewhere]
    assert len({pool_key(t) for t in tasks}) == 2
    runner = Runner(tasks, lambda: make_agent("oracle"), RunOptions(jobs=2, warm=2))
    made: list[WarmPools] = []
    real_init = WarmPools.__init__

    def remember(self: WarmPools, *args: object, **kwargs: object) -> None:
        real_init(self, *args, **kwargs)  # type: ignore[arg-type]
        made.append(self)

    monkeypatch.setattr(WarmPools, "__init__", remember)
    outcomes = runner.run()
    assert [o.reward for o in outcomes] == [1.0] * 6, [o.error for o in outcomes]
    assert len({o.sandbox_id for o in outcomes}) == 6, "every task gets a fresh sandbox"
    (pools,) = made
    stats = sorted((p.size, p.stats().started) for p in pools._pools.values())
    # Five tasks of one image: a pool of 2 that starts exactly 5; the lone task: a pool of 1.
    assert stats == [(1, 1), (2, 5)]
    assert all(p.stats().ready == 0 for p in pools._pools.values())
    assert list(tmp_path.glob("sandbox-runtime-*/sbx-*")) == []


@pytest.mark.slow
def test_run_warm_on_local_grades_as_without(tmp_path: Path) -> None:
    _check_run(tmp_path, "local", "oracle", 1.0, "--warm", "2", "--max-starts", "4")
    assert _sandbox_dirs(tmp_path) == []
