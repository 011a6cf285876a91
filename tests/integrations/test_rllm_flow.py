"""rLLM main's plugins (``sandbox-runtime-swe``): the flow's loop, its settings, the evaluator.

rLLM main is not on PyPI and CI cannot reach GitHub, so these tests check the contract
without it: the entry points the package declares, the settings' sources and errors, the
tool loop through the real ``openai`` client against a scripted server, grading by the
task's own tests (1 for the fix, 0 for nothing, an exception when the sandbox dies), and that
nothing imports rLLM at import time.  Where rLLM is importable (the venv of
examples/rllm_main/check.py) the last tests run the flow and evaluator through rLLM's own
loaders and ``AgentFlowEngine``.
"""

from __future__ import annotations

import ast
import base64
import json
import signal
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from sandbox_runtime.errors import ConfigError
from sandbox_runtime.integrations.rllm_flow import FLOW_NAME, SWEEvaluator, SWEFlow, write_benchmark
from sandbox_runtime.integrations.rllm_flow.evaluator import episode_patch, grade_patch
from sandbox_runtime.integrations.rllm_flow.flow import OpenAIChat, open_env, swe_task
from sandbox_runtime.integrations.rllm_flow.loop import Reply, run_loop
from sandbox_runtime.integrations.rllm_flow.settings import (
    BACKEND_ENV,
    BACKEND_OPTIONS_ENV,
    CONFIG_ENV,
    FlowSettings,
    resolve_settings,
)
from sandbox_runtime.swe import Task
from sandbox_runtime.swe.grading import GradingError
from tests.swe.conftest import task_named
from tests.swe.fake_chat import FakeChat

tomllib = pytest.importorskip("tomllib", reason="Python 3.11+ reads pyproject.toml")

ROOT = Path(__file__).resolve().parents[2]


def _gold_reply(task: Task) -> str:
    encoded = base64.b64encode(task.gold_patch.encode()).decode()
    return (
        "Fixing.\n<function=execute_bash>\n"
        f"<parameter=cmd>echo {encoded} | base64 -d | patch -p1</parameter>\n</function>"
    )


FINISH = "<function=finish>\n</function>"


def test_the_entry_points_name_the_flow_and_the_evaluator() -> None:
    """rLLM's loaders look up ``rllm.agents`` / ``rllm.evaluators`` by name and instantiate."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]
    assert project["rllm.agents"] == {
        FLOW_NAME: "sandbox_runtime.integrations.rllm_flow.flow:SWEFlow"
    }
    assert project["rllm.evaluators"] == {
        FLOW_NAME: "sandbox_runtime.integrations.rllm_flow.evaluator:SWEEvaluator"
    }
    flow, evaluator = SWEFlow(), SWEEvaluator()  # no-argument construction, as rLLM does
    assert callable(flow.run)
    assert callable(evaluator.evaluate)
    # Host-side: rLLM's hooks provision nothing and the gateway URL stays local (no tunnel).
    assert flow.needs_env is False
    assert flow.llm_inside_env is False


def test_the_library_does_not_import_rllm_and_the_plugins_import_it_late() -> None:
    """Outside ``integrations`` nothing imports rLLM; the plugins import it inside functions."""
    code = (
        "import sys, sandbox_runtime, sandbox_runtime.swe, sandbox_runtime.cli; "
        "print(any(n == 'rllm' or n.startswith('rllm.') for n in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
    package = ROOT / "src" / "sandbox_runtime" / "integrations" / "rllm_flow"
    for module in package.glob("*.py"):
        for node in ast.parse(module.read_text()).body:  # module level only
            names = (
                [alias.name for alias in node.names] if isinstance(node, ast.Import) else
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            )  # fmt: skip
            assert not any(name.split(".")[0] == "rllm" for name in names), module.name


def test_settings_come_from_file_then_environment_then_row(tmp_path: Path) -> None:
    config = tmp_path / "flow.toml"
    config.write_text('backend = "kubernetes"\nmax_steps = 7\n[backend_options]\nnamespace = "a"\n')
    environ = {CONFIG_ENV: str(config)}
    assert resolve_settings({}, environ).model_dump(include={"backend", "max_steps"}) == {
        "backend": "kubernetes",
        "max_steps": 7,
    }
    environ |= {BACKEND_ENV: "ags", BACKEND_OPTIONS_ENV: '{"tool_name": "swe"}'}
    settings = resolve_settings({}, environ)
    assert (settings.backend, settings.backend_options, settings.max_steps) == (
        "ags",
        {"tool_name": "swe"},
        7,
    )
    row = {"sandbox_runtime": {"backend": "local", "backend_options": {"isolation": "namespace"}}}
    settings = resolve_settings(row, environ)
    assert (settings.backend, settings.backend_options) == ("local", {"isolation": "namespace"})
    assert resolve_settings({}, {}).backend == "docker"


def test_bad_settings_are_one_line_errors_naming_the_field(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"task row field 'sandbox_runtime'.*field 'max_steps'"):
        resolve_settings({"sandbox_runtime": {"max_steps": 0}}, {})
    with pytest.raises(ConfigError, match=r"field 'bakend'"):
        resolve_settings({"sandbox_runtime": {"bakend": "docker"}}, {})
    with pytest.raises(ConfigError, match=BACKEND_OPTIONS_ENV):
        resolve_settings({}, {BACKEND_OPTIONS_ENV: "[1]"})
    broken = tmp_path / "flow.toml"
    broken.write_text("backend = \n")
    with pytest.raises(ConfigError, match=r"flow\.toml: not valid TOML"):
        resolve_settings({}, {CONFIG_ENV: str(broken)})


def test_rllm_sandbox_flags_are_refused_not_ignored() -> None:
    """rLLM's --sandbox-backend names rLLM's sandboxes (and may start a tunnel): not ours."""
    flow = SWEFlow()
    with pytest.raises(SystemExit, match=BACKEND_ENV) as refused:
        flow.configure({"sandbox_backend": "docker"})
    message = str(refused.value.code)
    assert "\n" not in message
    assert "--sandbox-backend" in message
    before = {signum: signal.getsignal(signum) for signum in (signal.SIGTERM, signal.SIGINT)}
    try:
        assert flow.configure({"sandbox_concurrency": 4}) == {}
    finally:
        for signum, handler in before.items():
            signal.signal(signum, handler)


def test_benchmark_rows_read_back_as_the_same_tasks(
    bundled_tasks: list[Task], tmp_path: Path
) -> None:
    data = write_benchmark(tmp_path / "bench", bundled_tasks, settings={"backend": "local"})
    rows = [json.loads(line) for line in data.read_text().splitlines()]
    assert len(rows) == len(bundled_tasks)
    toml = tomllib.loads((tmp_path / "bench" / "dataset.toml").read_text())["dataset"]
    assert toml["type"] == "simple"
    assert toml["default_agent"] == FLOW_NAME
    for row, task in zip(rows, bundled_tasks, strict=True):
        assert row["id"] == task.task_id
        assert row["sandbox_runtime"] == {"backend": "local"}
        assert swe_task(row) == task
        assert resolve_settings(row, {}).backend == "local"


def _chat_replies(texts: list[str]) -> FakeChat:
    return FakeChat([{"role": "assistant", "content": text} for text in texts])


@pytest.mark.parametrize(("script", "expected"), [("gold", 1.0), ("null", 0.0)])
def test_the_loop_through_the_openai_client_then_grading(
    bundled_tasks: list[Task], script: str, expected: float
) -> None:
    """Text protocol in, R2E-Gym frames out; the diff graded fresh by the task's tests."""
    task = task_named(bundled_tasks, "csvline", "r2e")
    settings = FlowSettings(backend="local", tools="builtin")
    replies = [_gold_reply(task), FINISH] if script == "gold" else ["Let me think.", FINISH]
    with _chat_replies(replies) as server:
        chat = OpenAIChat(server.url, "scripted", settings)
        with open_env(task, settings) as env:
            env.reset()
            result = run_loop(env, chat, max_steps=5)
        chat.close()
    assert result.stop_reason == "submitted"
    assert len(result.turns) == 2
    first_request = server.requests[0]["messages"]
    assert first_request[1]["content"].startswith("The repository is at /testbed")
    if script == "gold":
        assert "Exit code: 0" in result.turns[0].observation
        assert result.patch.strip()
    else:  # a reply with no tool call costs a step and gets the reminder
        assert "You forgot to use a function call" in result.turns[0].observation
        assert result.patch == ""
    assert result.turns[-1].done
    graded = grade_patch(task, result.patch, settings)
    assert graded.reward == expected
    assert graded.grade_in == "fresh"


def test_the_loop_hands_the_tamper_flags_to_the_evaluator(bundled_tasks: list[Task]) -> None:
    """What the agent changed that a test run reads reaches the evaluator's integrity counts."""
    from sandbox_runtime.integrations.rllm_flow.evaluator import episode_tamper

    task = task_named(bundled_tasks, "csvline", "r2e")
    settings = FlowSettings(backend="local", tools="builtin")
    command = "<parameter=cmd>echo x=1 > conftest.py</parameter>"
    write = f"<function=execute_bash>\n{command}\n</function>"
    with _chat_replies([write, FINISH]) as server:
        chat = OpenAIChat(server.url, "scripted", settings)
        with open_env(task, settings) as env:
            env.reset()
            result = run_loop(env, chat, max_steps=5)
        chat.close()
    assert {"path": "conftest.py", "kind": "test config"}.items() <= result.tamper[0].items()
    episode = type("Episode", (), {"artifacts": {"tamper": result.tamper}})()
    assert [(f.path, f.kind) for f in episode_tamper(episode)] == [("conftest.py", "test config")]
    assert episode_tamper(type("Episode", (), {"artifacts": {}})()) == []


def test_the_loop_stops_at_max_steps(bundled_tasks: list[Task]) -> None:
    task = task_named(bundled_tasks, "pager", "swebench")
    settings = FlowSettings(backend="local", tools="builtin")
    calls: list[int] = []

    def chat(messages: list[dict[str, Any]]) -> Reply:
        calls.append(len(messages))
        return Reply("<function=execute_bash>\n<parameter=cmd>ls</parameter>\n</function>")

    with open_env(task, settings) as env:
        env.reset()
        result = run_loop(env, chat, max_steps=3)
    assert result.stop_reason == "max_steps"
    assert len(result.turns) == 3
    assert calls == [2, 4, 6]  # each call sees the previous reply and its observation


def test_a_grading_sandbox_that_dies_is_an_exception_not_a_zero(
    bundled_tasks: list[Task], monkeypatch: pytest.MonkeyPatch
) -> None:
    """rLLM's engine turns the exception into an ERROR episode (masked by the trainer)."""
    task = task_named(bundled_tasks, "csvline", "r2e")
    from sandbox_runtime.integrations.rllm_flow import evaluator as module
    from sandbox_runtime.swe.grading import grade as real_grade

    def grade_after_the_sandbox_died(task: Task, sandbox: Any, **kwargs: Any) -> Any:
        sandbox.backend.stop()  # gone under the grader, after it was readied
        return real_grade(task, sandbox, **kwargs)

    monkeypatch.setattr("sandbox_runtime.swe.isolation.grade", grade_after_the_sandbox_died)
    monkeypatch.setattr("sandbox_runtime.swe.strict.grade", grade_after_the_sandbox_died)
    row = {**task.source, "sandbox_runtime": {"backend": "local"}}
    episode = type("Episode", (), {"artifacts": {"patch": ""}, "trajectories": []})()
    with pytest.raises(GradingError, match="infrastructure error"):
        module.SWEEvaluator().evaluate(row, episode)


def _play_group(task: Task, settings: FlowSettings, replies: list[list[str]]) -> list[float | None]:
    """One rollout per script, all at once as rLLM runs a group; each graded fresh."""

    def rollout(script: list[str]) -> float | None:
        with _chat_replies(script) as server:
            chat = OpenAIChat(server.url, "scripted", settings)
            with open_env(task, settings) as env:
                env.reset()
                result = run_loop(env, chat, max_steps=5)
            chat.close()
        return grade_patch(task, result.patch, settings).reward

    with ThreadPoolExecutor(max_workers=len(replies)) as pool:
        return list(pool.map(rollout, replies))


def test_a_group_of_rollouts_shares_one_setup(
    bundled_tasks: list[Task], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """rLLM runs each task ``group_size`` times at once: one setup, then copies of it."""
    from sandbox_runtime.integrations.rllm_flow import evaluator, flow
    from sandbox_runtime.swe.prepared import PreparedStates

    task = task_named(bundled_tasks, "csvline", "r2e")
    gold, null = [_gold_reply(task), FINISH], ["Let me think.", FINISH]
    for share, setups in ((True, 1), (False, 0)):
        shared = PreparedStates()
        monkeypatch.setattr(flow, "SHARED_SETUPS", shared)
        monkeypatch.setattr(evaluator, "SHARED_SETUPS", shared)
        settings = FlowSettings(
            backend="local",
            tools="builtin",
            share_setup=share,
            backend_options={"base_dir": str(tmp_path / f"share-{share}")},
        )
        rewards = _play_group(task, settings, [gold, null, gold, null])
        # The same rewards either way: a copy of the prepared state is a fresh setup.
        assert rewards == [1.0, 0.0, 1.0, 0.0]
        # Shared: one setup for the four rollouts and their four fresh grading sandboxes.
        assert (shared.setups, shared.copies) == (setups, 8 if share else 0)
        shared.close()
        # Every sandbox and every saved state is gone.
        leftovers = [p.name for p in (tmp_path / f"share-{share}").glob("*")]
        assert [name for name in leftovers if name.startswith(("sbx-", "ckpt-"))] == []


def test_an_episode_without_a_diff_is_refused() -> None:
    episode = type("Episode", (), {"artifacts": {}, "trajectories": []})()
    with pytest.raises(ConfigError, match=r"artifacts\['patch'\]"):
        episode_patch(episode)


# --- with rLLM main importable (the venv of examples/rllm_main/check.py) -------------------


def test_rllm_loads_both_by_name() -> None:
    pytest.importorskip("rllm.eval.agent_loader")
    from rllm.eval.agent_loader import load_agent
    from rllm.eval.evaluator_loader import load_evaluator

    assert isinstance(load_agent(FLOW_NAME), SWEFlow)
    assert isinstance(load_evaluator(FLOW_NAME), SWEEvaluator)


def test_rllm_types_round_trip_through_the_flow_and_evaluator(bundled_tasks: list[Task]) -> None:
    pytest.importorskip("rllm.types")
    from rllm.types import AgentConfig, Episode
    from rllm.types import Task as RLLMTask
    from rllm.workflows.workflow import TerminationReason

    task = task_named(bundled_tasks, "csvline", "r2e")
    row = {
        **task.source,
        "id": task.task_id,
        "sandbox_runtime": {"backend": "local", "tools": "builtin"},
    }
    rllm_task = RLLMTask(id=task.task_id, instruction="", metadata=row)
    with _chat_replies([_gold_reply(task), FINISH]) as server:
        config = AgentConfig(base_url=server.url, model="scripted", session_uid="t:0")
        episode = SWEFlow().run(rllm_task, config)
    assert isinstance(episode, Episode)
    assert episode.termination_reason == TerminationReason.ENV_DONE
    assert len(episode.trajectories[0].steps) == 2  # one Step per model call, as traces come
    output = SWEEvaluator().evaluate(rllm_task, episode)
    assert (output.reward, output.is_correct) == (1.0, True)


def test_rllm_group_of_one_task_shares_one_setup(
    bundled_tasks: list[Task], monkeypatch: pytest.MonkeyPatch
) -> None:
    """rLLM's own grouping (``interleave_tasks``), its types, the flow and evaluator at once."""
    pytest.importorskip("rllm.data.utils")
    from rllm.data.utils import interleave_tasks
    from rllm.types import AgentConfig
    from rllm.types import Task as RLLMTask

    from sandbox_runtime.integrations.rllm_flow import evaluator, flow
    from sandbox_runtime.swe.prepared import PreparedStates

    shared = PreparedStates()
    monkeypatch.setattr(flow, "SHARED_SETUPS", shared)
    monkeypatch.setattr(evaluator, "SHARED_SETUPS", shared)
    task = task_named(bundled_tasks, "pager", "r2e")
    row = {
        **task.source,
        "id": task.task_id,
        "sandbox_runtime": {"backend": "local", "tools": "builtin"},
    }
    group, ids = interleave_tasks([RLLMTask(id=task.task_id, instruction="", metadata=row)], 4)
    assert ids == [task.task_id] * 4

    def rollout(index: int) -> float:
        script = [_gold_reply(task), FINISH] if index % 2 == 0 else ["Hmm.", FINISH]
        with _chat_replies(script) as server:
            config = AgentConfig(
                base_url=server.url, model="scripted", session_uid=f"{ids[index]}:{index}"
            )
            episode = SWEFlow().run(group[index], config)
        return float(SWEEvaluator().evaluate(group[index], episode).reward)

    try:
        with ThreadPoolExecutor(max_workers=4) as pool:
            rewards = list(pool.map(rollout, range(4)))
    finally:
        shared.close()
    assert rewards == [1.0, 0.0, 1.0, 0.0]
    assert (shared.setups, shared.copies) == (1, 8)


def test_rllm_trainer_drops_error_episodes_under_compact_filtering() -> None:
    """What rLLM's engine makes of an exception (an ERROR episode) never reaches the update."""
    pytest.importorskip("rllm.trainer.algorithms.transform")
    from rllm.trainer.algorithms.config import CompactFilteringConfig
    from rllm.trainer.algorithms.transform import _build_trajectory_groups
    from rllm.types import Episode, Step, Trajectory
    from rllm.workflows.workflow import TerminationReason

    steps = [Step(model_response="<function=finish>\n</function>", done=True)]
    graded = Episode(
        id="a:0",
        trajectories=[Trajectory(name=FLOW_NAME, steps=steps, reward=0.0)],
        termination_reason=TerminationReason.ENV_DONE,
    )
    # The engine's shape after retry_limit failed attempts (agentflow_engine.py).
    errored = Episode(
        id="a:1",
        is_correct=False,
        termination_reason=TerminationReason.ERROR,
        metadata={"error": {"message": "no reward: infrastructure error"}},
    )
    masking = CompactFilteringConfig(enable=True, mask_error=True)
    assert masking.should_mask(TerminationReason.ERROR)
    for config in (masking, CompactFilteringConfig()):
        groups = _build_trajectory_groups([graded, errored], config)
        assert [len(group.trajectories) for group in groups] == [1]
        assert groups[0].trajectories[0].reward == 0.0  # the graded one only


@pytest.mark.docker
@pytest.mark.slow
def test_the_evaluator_grades_strictly_unless_told_otherwise(
    bundled_tasks: list[Task], docker_image: str
) -> None:
    """A conftest that forces every test to pass earns 0 by default and 1 under ``benchmark``."""
    from sandbox_runtime.swe.images import build_sample_image
    from sandbox_runtime.swe.redteam.payloads import FORCE_PASS

    build_sample_image("pager", base=docker_image)
    task = task_named(bundled_tasks, "pager", "swebench")
    body = "".join(f"+{line}\n" for line in FORCE_PASS.splitlines())
    conftest = (
        "diff --git a/conftest.py b/conftest.py\nnew file mode 100644\n--- /dev/null\n"
        f"+++ b/conftest.py\n@@ -0,0 +1,{len(FORCE_PASS.splitlines())} @@\n{body}"
    )
    strict = grade_patch(task, conftest, FlowSettings(backend="docker", base_image=docker_image))
    lenient = grade_patch(
        task, conftest, FlowSettings(backend="docker", base_image=docker_image, grading="benchmark")
    )
    assert (strict.reward, strict.grading, [d["path"] for d in strict.dropped]) == (
        0.0,
        "strict",
        ["conftest.py"],
    )
    assert (lenient.reward, lenient.grading) == (1.0, "benchmark")


def test_rllm_train_schedule_feeds_the_prefetcher(
    bundled_tasks: list[Task], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """rLLM main's schedule (its loader, its GRPO interleaving) drives ``TaskPrefetcher``.

    The order rLLM's own warm queue prefetches from (``build_train_schedule``) is fed, task
    by task and copy by copy, to the prefetcher behind ``SWEEnv``; every rollout, taken in
    that order, finds its sandbox started, and none is started for nobody.
    """
    pytest.importorskip("rllm.sandbox.train_schedule")
    from rllm.data.dataloader import StatefulTaskDataLoader
    from rllm.sandbox.train_schedule import build_train_schedule

    from sandbox_runtime.integrations.rllm import SWEEnv
    from sandbox_runtime.integrations.rllm_flow.flow import task_row
    from sandbox_runtime.swe.prefetch import TaskPrefetcher
    from sandbox_runtime.swe.runner import task_sandbox_config

    monkeypatch.setenv("TMPDIR", str(tmp_path))
    rows = [{**task.source, "id": task.task_id} for task in bundled_tasks[:4]]
    loader = StatefulTaskDataLoader(rows, batch_size=2, shuffle=True, seed=7)
    schedule = [
        swe_task(task_row(item))
        for item in build_train_schedule(loader, group_size=2, total_epochs=1)
    ]
    assert len(schedule) == 8  # 2 batches x 2 tasks x 2 copies, in rLLM's consumption order

    def config_of(task: Task) -> Any:  # the sandbox the environment itself would open
        return task_sandbox_config(task, SWEEnv(task, backend="local").options)

    prefetcher = TaskPrefetcher(schedule, config_of, ahead=3)
    try:
        for task in schedule:
            with SWEEnv(task, backend="local", prefetcher=prefetcher) as env:
                env.reset()
                assert env.sandbox is not None
                assert env.sandbox.is_alive()
        stats = prefetcher.stats()
    finally:
        prefetcher.close()
    assert (stats.scheduled, stats.handed_out, stats.started) == (8, 8, 8)
    assert prefetcher.stats().discarded == 0
    assert list(tmp_path.glob("sandbox-runtime-*/sbx-*")) == []


def test_the_benchmark_writer_refuses_a_missing_file_in_one_line(tmp_path: Path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "sandbox_runtime.integrations.rllm_flow.benchmark",
            str(tmp_path / "bench"),
            "--rows",
            str(tmp_path / "missing.jsonl"),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1, done.stderr
    assert "missing.jsonl" in done.stderr
