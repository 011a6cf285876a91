"""Task sandboxes sized from the episode's budget, kept by a lease, and never graded in a
sandbox that a hard cap would end under the grading (``swe/lifetimes.py``, docs/leases.md)."""

from __future__ import annotations

import logging
import time

import pytest

from sandbox_runtime import SandboxConfig, SandboxRuntime
from sandbox_runtime.swe import Task
from sandbox_runtime.swe.agents.base import Agent, AgentResult, Budget
from sandbox_runtime.swe.agents.simple import OracleAgent
from sandbox_runtime.swe.lifetimes import (
    GRADING_HEADROOM_S,
    SETUP_ALLOWANCE_S,
    agent_seconds,
    cap_warning,
    episode_lifetime,
)
from sandbox_runtime.swe.runner import Runner, RunOptions, task_sandbox_config
from tests.swe.conftest import task_named


def test_the_lifetime_is_setup_agent_budget_and_grading() -> None:
    assert agent_seconds(30, 120, None) == 2 * 30 * 120
    assert agent_seconds(30, 120, 600) == 600
    assert (
        episode_lifetime(10, 60, None, 900) == SETUP_ALLOWANCE_S + 1200 + 900 + GRADING_HEADROOM_S
    )


def test_a_task_sandbox_is_sized_from_its_budget_unless_told(bundled_tasks: list[Task]) -> None:
    task = task_named(bundled_tasks, "pricing", "r2e")
    sized = task_sandbox_config(task, RunOptions(max_steps=5, step_timeout=10, test_timeout=100))
    assert sized.lifetime == SETUP_ALLOWANCE_S + 100 + 100 + GRADING_HEADROOM_S
    assert sized.max_lifetime is None
    told = task_sandbox_config(task, RunOptions(lifetime=42, max_lifetime=50))
    assert (told.lifetime, told.max_lifetime) == (42, 50)


def test_a_cap_shorter_than_an_episode_is_said_up_front(
    bundled_tasks: list[Task], caplog: pytest.LogCaptureFixture
) -> None:
    assert cap_warning(SandboxConfig(backend="local"), 10_000) is None
    warning = cap_warning(SandboxConfig(backend="local", lifetime=10, max_lifetime=60), 10_000)
    assert warning is not None
    assert "60 s at most" in warning
    task = task_named(bundled_tasks, "pricing", "r2e")
    options = RunOptions(backend="local", lifetime=5, max_lifetime=30, test_timeout=60)
    with caplog.at_level(logging.WARNING, logger="sandbox_runtime.swe"):
        Runner([task], OracleAgent, options).run()
    assert any("its hard cap" in record.getMessage() for record in caplog.records)


class _Sleeper(Agent):
    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def run(self, task: Task, sandbox: SandboxRuntime, budget: Budget) -> AgentResult:
        time.sleep(self.seconds)
        return OracleAgent().run(task, sandbox, budget)


def test_grading_that_the_cap_would_cut_is_an_error_not_a_zero(bundled_tasks: list[Task]) -> None:
    task = task_named(bundled_tasks, "pricing", "r2e")  # graded in the agent's sandbox
    options = RunOptions(backend="local", lifetime=4, max_lifetime=6, test_timeout=60)
    (outcome,) = Runner([task], lambda: _Sleeper(2), options).run()
    assert outcome.reward is None
    assert outcome.error is not None
    assert "LifetimeCapError" in outcome.error


def test_a_sandbox_past_its_first_lifetime_is_still_graded(bundled_tasks: list[Task]) -> None:
    task = task_named(bundled_tasks, "pricing", "r2e")
    options = RunOptions(backend="local", lifetime=3, test_timeout=60)
    (outcome,) = Runner([task], lambda: _Sleeper(5), options).run()
    assert outcome.reward == 1.0, outcome.reason


def test_swe_env_sizes_its_sandbox_and_extends_it_before_grading(
    bundled_tasks: list[Task],
) -> None:
    from sandbox_runtime.integrations.rllm import SWEEnv

    task = task_named(bundled_tasks, "pricing", "r2e")  # graded in the episode's sandbox
    env = SWEEnv(
        task,
        backend="local",
        max_steps=5,
        step_timeout=10,
        reward_timeout=100,
        tools="builtin",
        grading="benchmark",
    )
    with env:
        env.reset()
        sandbox = env.sandbox
        assert sandbox is not None
        assert sandbox.config.lifetime == SETUP_ALLOWANCE_S + 100 + 100 + GRADING_HEADROOM_S
        sandbox.set_lifetime(3)  # as if the episode had used up nearly all of it
        assert env.compute_final_reward() == 0.0  # graded (no fix made), not lost
        assert (sandbox.expires_at or 0) - time.time() >= 100  # extended for the grading
