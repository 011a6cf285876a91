"""``run --prefetch K``: tasks take prefetched sandboxes, grade the same, leave nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sandbox_runtime._core.prefetch import PrefetchStats
from sandbox_runtime.errors import ConfigError
from sandbox_runtime.swe import Task
from sandbox_runtime.swe.agents import make_agent
from sandbox_runtime.swe.group import GroupRunner, can_fork
from sandbox_runtime.swe.runner import Runner, RunOptions
from sandbox_runtime.swe.warm import pool_key
from tests.swe.test_cli_run import _check_run, _sandbox_dirs


def test_every_task_its_own_image_gets_a_head_start(
    bundled_tasks: list[Task], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    tasks = bundled_tasks[:3] + bundled_tasks[8:]  # R2E-Gym rows grade same, SWE-bench fresh
    assert len({pool_key(t) for t in tasks}) == len(tasks), "what --warm cannot help"
    runner = Runner(tasks, lambda: make_agent("oracle"), RunOptions(jobs=2, prefetch=3))
    outcomes = runner.run()
    assert [o.reward for o in outcomes] == [1.0] * 5, [o.error for o in outcomes]
    assert runner._prefetch is not None
    stats = runner._prefetch.stats()
    # A task graded in a fresh sandbox has that one scheduled too, after its agent's.
    fresh = sum(runner._grades_fresh(task) for task in tasks)
    assert 0 < fresh < 5, "the bundled tasks grade both ways"
    assert stats.scheduled == stats.started == stats.handed_out == 5 + fresh, stats
    assert stats.discarded == 0
    assert stats.started_on_spot < 5 + fresh, "some sandboxes were ready before their task"
    assert list(tmp_path.glob("sandbox-runtime-*/sbx-*")) == []


class _CrashingAgent:
    """An agent that fails before anything is graded (an infrastructure-like crash)."""

    def run(self, task: Task, sandbox: Any, budget: Any) -> Any:
        raise RuntimeError("the agent crashed")


def test_a_task_that_ends_before_grading_gives_its_grading_slot_back(
    bundled_tasks: list[Task], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    tasks = bundled_tasks[:3]
    options = RunOptions(jobs=1, prefetch=4, grading="strict")  # strict: every task fresh
    runner = Runner(tasks, lambda: _CrashingAgent(), options)  # type: ignore[arg-type,return-value]
    seen: list[PrefetchStats] = []  # the schedule as each task ends (before the run closes it)
    runner.on_done = lambda _: seen.append(runner._prefetch.stats())  # type: ignore[union-attr]
    outcomes = runner.run()
    assert [o.reward for o in outcomes] == [None] * 3
    assert all("the agent crashed" in (o.error or "") for o in outcomes)
    assert runner._prefetch is not None
    stats = runner._prefetch.stats()
    assert stats.scheduled == 6
    assert stats.handed_out == 3  # the agents' sandboxes only
    # Each grading sandbox was given back when its task ended, not kept until the run's end.
    assert (seen[-1].ready, seen[-1].starting) == (0, 0), seen[-1]
    assert stats.discarded >= 1
    assert list(tmp_path.glob("sandbox-runtime-*/sbx-*")) == []


def test_a_group_prefetches_what_its_rollouts_open(
    bundled_tasks: list[Task], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    tasks = bundled_tasks[:2]
    options = RunOptions(jobs=2, prefetch=2, group=2)
    runner = GroupRunner(tasks, lambda: make_agent("oracle"), options)
    outcomes = runner.run()
    assert [o.reward for o in outcomes] == [1.0] * 4, [o.error for o in outcomes]
    assert runner._prefetch is not None
    stats = runner._prefetch.stats()
    per_task = 1 if can_fork(runner) else sum(2 * (1 + runner._grades_fresh(t)) for t in tasks) // 2
    assert stats.scheduled == stats.handed_out == 2 * per_task
    assert stats.started == stats.handed_out
    assert stats.discarded == 0
    assert list(tmp_path.glob("sandbox-runtime-*/sbx-*")) == []


def test_prefetch_and_warm_together_are_refused(bundled_tasks: list[Task]) -> None:
    with pytest.raises(ConfigError, match="choose one"):
        Runner(bundled_tasks, lambda: make_agent("oracle"), RunOptions(prefetch=2, warm=2))


@pytest.mark.slow
def test_run_prefetch_on_local_grades_as_without(tmp_path: Path) -> None:
    _check_run(tmp_path, "local", "oracle", 1.0, "--prefetch", "3")
    assert _sandbox_dirs(tmp_path) == []


def test_swe_env_takes_its_sandbox_from_a_fed_prefetcher(
    bundled_tasks: list[Task], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sandbox_runtime.integrations.rllm import SWEEnv
    from sandbox_runtime.swe.prefetch import TaskPrefetcher
    from sandbox_runtime.swe.runner import task_sandbox_config

    monkeypatch.setenv("TMPDIR", str(tmp_path))
    tasks = bundled_tasks[:2]  # a trainer's next batch, in its dataloader's order

    def config_of(task: Task) -> Any:  # the sandbox the environment itself would open
        return task_sandbox_config(task, SWEEnv(task, backend="local").options)

    prefetcher = TaskPrefetcher(tasks, config_of, ahead=2)
    try:
        for task in tasks:
            with SWEEnv(task, backend="local", prefetcher=prefetcher) as env:
                env.reset()
                assert env.sandbox is not None
                assert env.sandbox.is_alive()
        stats = prefetcher.stats()
        assert stats.handed_out == 2
        assert stats.started_on_spot < 2
    finally:
        prefetcher.close()
    assert prefetcher.stats().discarded == 0
    assert list(tmp_path.glob("sandbox-runtime-*/sbx-*")) == []


def test_grading_slots_come_after_the_agents_of_the_tasks_running_beside_them(
    bundled_tasks: list[Task],
) -> None:
    """With ``-j 3``, tasks 0-2 start at once: their agents' sandboxes are needed before any
    grading one, and task 0's grading sandbox before task 3's agent (task 3 starts when task 0
    ends)."""
    from sandbox_runtime.swe.prefetch import TaskPrefetcher
    from sandbox_runtime.swe.runner import task_sandbox_config

    tasks = bundled_tasks[:5]
    options = RunOptions(jobs=3)
    slots = TaskPrefetcher._slots(
        tasks,
        lambda task: task_sandbox_config(task, options),
        copies=2,  # each task: its agent's sandbox, then its fresh grading one
        later=lambda task: 1,
        lag=options.jobs - 1,
    )
    key = {pool_key(task): f"t{index}" for index, task in enumerate(tasks)}
    order = [key[slot.key] for slot in slots]
    assert order == ["t0", "t1", "t2", "t0", "t3", "t1", "t4", "t2", "t3", "t4"]
    # Without a lag (or a later part) the grading slot follows its agent's at once.
    plain = TaskPrefetcher._slots(
        tasks, lambda task: task_sandbox_config(task, options), 2, None, 0
    )
    assert [key[slot.key] for slot in plain] == [f"t{i // 2}" for i in range(10)]
