"""verl 0.9.1's agent-loop worker runs ``sandbox_runtime_swe`` on the bundled tasks, on a CPU.

What verl's trainer does per batch, with verl's own code: the parquet ``sandbox-runtime tasks
rllm`` writes, read by verl's ``RLHFDataset`` and collated into a ``DataProto``; the agent loop
registered from the YAML file the package ships (``agent_loop_config_path``) and instantiated
by ``AgentLoopWorker._run_agent_loop``; each output padded by ``_agent_loop_postprocess`` and
the batch assembled by ``_postprocess`` (``rm_scores``, ``response_mask``).  Only the rollout
server is scripted: ``generate`` answers token ids of a tokenizer trained here (no hub), with
a ChatML-style template.  Gold fixes earn 1, no fix 0, a grading sandbox killed under the
grader is masked (a response mask of zeros, ``reward_valid`` false), never a 0.
"""

from __future__ import annotations

import asyncio
import base64
from pathlib import Path
from typing import Any

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf
from tokenizers import Tokenizer, models, pre_tokenizers, trainers
from tokenizers import decoders as tk_decoders
from transformers import PreTrainedTokenizerFast
from verl.experimental.agent_loop import agent_loop as verl_agent_loop
from verl.experimental.agent_loop.agent_loop import AgentLoopWorker
from verl.utils.dataset.rl_dataset import RLHFDataset, collate_fn
from verl.utils.import_utils import resolve_config_path
from verl.workers.rollout.replica import TokenOutput

import verl
from sandbox_runtime.errors import ConfigError, SandboxError
from sandbox_runtime.integrations.rllm_flow.loop import SYSTEM_PROMPT, task_message
from sandbox_runtime.integrations.verl import AGENT_LOOP_CONFIG, AGENT_LOOP_NAME
from sandbox_runtime.swe import Task
from sandbox_runtime.swe.parquet import write_rllm_parquet
from tests.swe.conftest import task_named
from verl import DataProto

pytestmark = pytest.mark.timeout(900)

TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
FINISH = "Done.\n<function=finish>\n</function>"
NOTHING = "I will not change anything."


def _gold_reply(task: Task) -> str:
    encoded = base64.b64encode(task.gold_patch.encode()).decode()
    return (
        "Applying the fix.\n<function=execute_bash>\n"
        f"<parameter=cmd>echo {encoded} | base64 -d | patch -p1</parameter>\n</function>"
    )


@pytest.fixture(scope="module")
def tokenizer(bundled_tasks: list[Task]) -> PreTrainedTokenizerFast:
    """A byte-level BPE trained on the tasks and the loop's texts, with a chat template."""
    texts = [SYSTEM_PROMPT, FINISH, NOTHING] + [task_message(t) for t in bundled_tasks]
    texts += [_gold_reply(t) for t in bundled_tasks]
    model = Tokenizer(models.BPE())
    model.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    model.decoder = tk_decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=800,
        special_tokens=["<pad>", "<|im_start|>", "<|im_end|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    model.train_from_iterator(texts, trainer=trainer)
    tok = PreTrainedTokenizerFast(tokenizer_object=model, pad_token="<pad>", eos_token="<|im_end|>")
    tok.chat_template = TEMPLATE
    return tok


class ScriptedServer:
    """verl's ``server_manager`` at token level: each new request id plays the next script."""

    def __init__(self, tokenizer: PreTrainedTokenizerFast, scripts: list[list[str]]):
        self.tokenizer = tokenizer
        self.waiting = [list(replies) for replies in scripts]
        self.scripts: dict[str, list[str]] = {}
        self.calls: dict[str, list[tuple[list[int], list[int]]]] = {}

    async def generate(
        self, request_id: str, *, prompt_ids: list[int], sampling_params: dict[str, Any], **_: Any
    ) -> TokenOutput:
        if request_id not in self.scripts:
            self.scripts[request_id] = self.waiting.pop(0)
        replies = self.scripts[request_id]
        reply = replies.pop(0)
        ids = self.tokenizer(reply, add_special_tokens=False)["input_ids"]
        ids.append(self.tokenizer.convert_tokens_to_ids("<|im_end|>"))
        self.calls.setdefault(request_id, []).append((list(prompt_ids), ids))
        return TokenOutput(token_ids=ids, log_probs=[-0.25] * len(ids), stop_reason="completed")

    def first_reply(self, request_id: str) -> str:
        return str(self.tokenizer.decode(self.calls[request_id][0][1], skip_special_tokens=True))


def _config(overrides: list[str]) -> Any:
    config_dir = Path(verl.__file__).parent / "trainer" / "config"
    with initialize_config_dir(config_dir=str(config_dir), version_base=None):
        return compose(
            config_name="ppo_trainer",
            overrides=[
                f"actor_rollout_ref.rollout.agent.agent_loop_config_path={AGENT_LOOP_CONFIG}",
                f"actor_rollout_ref.rollout.agent.default_agent_loop={AGENT_LOOP_NAME}",
                "actor_rollout_ref.rollout.prompt_length=2048",
                "actor_rollout_ref.rollout.response_length=4096",
                "data.max_prompt_length=2048",
                *overrides,
            ],
        )


def _worker(config: Any, server: ScriptedServer, tokenizer: Any) -> AgentLoopWorker:
    """verl's worker without Ray or GPUs: the registry read from the config as its __init__ does."""
    path = resolve_config_path(config.actor_rollout_ref.rollout.agent.agent_loop_config_path)
    for entry in OmegaConf.load(path):
        verl_agent_loop._agent_loop_registry[entry.name] = entry
    worker = object.__new__(AgentLoopWorker)
    worker.config = config
    worker.rollout_config = config.actor_rollout_ref.rollout
    worker.llm_client = server
    worker.tokenizer = tokenizer
    worker.processor = None
    worker.hf_model_type = None
    worker.dataset_cls = RLHFDataset
    worker.tools = []
    worker.mm_processor_kwargs = {}
    worker.reward_loop_worker_handles = None
    worker.distillation_enabled = False
    return worker


def _batch(tasks: list[Task], tmp_path: Path, tokenizer: Any, config: Any) -> DataProto:
    write_rllm_parquet(tasks, tmp_path, split="train")
    dataset = RLHFDataset(
        data_files=[str(tmp_path / "train_verl.parquet")], tokenizer=tokenizer, config=config.data
    )
    return DataProto.from_single_dict(collate_fn([dataset[i] for i in range(len(dataset))]))


async def _rollouts(worker: AgentLoopWorker, batch: DataProto) -> DataProto:
    """What ``AgentLoopWorker.generate_sequences`` does per row, then its batch assembly."""

    async def one(index: int) -> Any:
        kwargs = {k: v[index] for k, v in batch.non_tensor_batch.items()}
        kwargs.setdefault("agent_name", AGENT_LOOP_NAME)
        trajectory = {"step": 0, "sample_index": index, "rollout_n": 0, "validate": False}
        return await worker._run_agent_loop({"temperature": 1.0}, trajectory, **kwargs)

    outputs = await asyncio.gather(*(one(i) for i in range(len(batch))))
    return worker._postprocess(outputs, input_non_tensor_batch=batch.non_tensor_batch)


def _check_transcript(
    data: DataProto, row: int, server_calls: list[tuple[list[int], list[int]]], tokenizer: Any
) -> None:
    """Token ids and mask: the model's tokens 1, every observation 0, prompt as last sent."""
    mask = data.batch["response_mask"][row]
    attention = data.batch["attention_mask"][row]
    prompt_width = data.batch["prompts"].shape[1]
    prompt = data.batch["prompts"][row][attention[:prompt_width].bool()].tolist()
    response = data.batch["responses"][row][attention[prompt_width:].bool()].tolist()
    first_prompt = server_calls[0][0]
    assert prompt == first_prompt
    expected_mask: list[int] = []
    expected: list[int] = []
    for index, (sent, generated) in enumerate(server_calls):
        if index:  # what came between the previous reply and this call: the observation, 0s
            between = sent[len(first_prompt) + len(expected) :]
            assert sent[: len(first_prompt) + len(expected)] == first_prompt + expected
            assert "<|im_start|>user\n" in tokenizer.decode(between, skip_special_tokens=False)
            expected += between
            expected_mask += [0] * len(between)
        expected += generated
        expected_mask += [1] * len(generated)
    assert response == expected
    assert mask[: len(expected)].tolist() == expected_mask
    assert int(mask.sum()) == sum(len(g) for _, g in server_calls)


def _row_of(data: DataProto, server: ScriptedServer, request_id: str) -> int:
    """The batch row a request produced: the one whose response starts with its first reply."""
    first = server.calls[request_id][0][1]
    for row in range(len(data)):
        if data.batch["responses"][row][: len(first)].tolist() == first:
            return row
    raise AssertionError(f"no row for {request_id}")


@pytest.mark.parametrize("backend", ["local", "docker"])
def test_gold_earns_1_and_nothing_0_through_verls_worker(
    backend: str,
    bundled_tasks: list[Task],
    tokenizer: Any,
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> None:
    task = task_named(bundled_tasks, "csvline", "r2e")
    overrides = [f"+sandbox_runtime.backend={backend}", "+sandbox_runtime.tools=builtin"]
    if backend == "docker":
        image = request.getfixturevalue("docker_image")
        overrides.append(f"+sandbox_runtime.base_image={image}")
    config = _config(overrides)
    gold = _gold_reply(task)
    # Two rows of one task (a group of two): one rollout fixes it, the other does nothing.
    batch = _batch([task, task], tmp_path, tokenizer, config)
    server = ScriptedServer(tokenizer, [[gold, FINISH], [NOTHING, FINISH]])
    data = asyncio.run(_rollouts(_worker(config, server, tokenizer), batch))
    assert list(data.non_tensor_batch["reward_valid"]) == [True, True]
    assert list(data.non_tensor_batch["stop_reason"]) == ["submitted", "submitted"]
    rewards = data.batch["rm_scores"].sum(dim=-1).tolist()
    assert sorted(rewards) == [0.0, 1.0]
    for request_id in server.calls:
        row = _row_of(data, server, request_id)
        _check_transcript(data, row, server.calls[request_id], tokenizer)
        played_gold = server.first_reply(request_id) == gold
        assert rewards[row] == (1.0 if played_gold else 0.0)
        observation = tokenizer.decode(server.calls[request_id][1][0], skip_special_tokens=False)
        if played_gold:  # R2E-Gym's frame of the tool's output, as the model reads it
            assert "Exit code: 0" in observation
        else:  # a reply without a tool call gets the reminder, as an observation (masked)
            assert "You forgot to use a function call" in observation


def _kill_the_grading_sandbox(monkeypatch: pytest.MonkeyPatch) -> None:
    from sandbox_runtime.swe.grading import grade as real_grade

    def grade_after_the_sandbox_died(task: Task, sandbox: Any, **kwargs: Any) -> Any:
        sandbox.backend.stop()  # gone under the grader, after it was readied
        return real_grade(task, sandbox, **kwargs)

    monkeypatch.setattr("sandbox_runtime.swe.isolation.grade", grade_after_the_sandbox_died)
    monkeypatch.setattr("sandbox_runtime.swe.strict.grade", grade_after_the_sandbox_died)


def test_a_killed_grading_sandbox_is_masked_not_a_zero(
    bundled_tasks: list[Task], tokenizer: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _kill_the_grading_sandbox(monkeypatch)
    task = task_named(bundled_tasks, "csvline", "r2e")
    config = _config(["+sandbox_runtime.backend=local", "+sandbox_runtime.tools=builtin"])
    batch = _batch([task], tmp_path, tokenizer, config)
    server = ScriptedServer(tokenizer, [[_gold_reply(task), FINISH]])
    data = asyncio.run(_rollouts(_worker(config, server, tokenizer), batch))
    assert list(data.non_tensor_batch["reward_valid"]) == [False]
    assert "infrastructure error" in data.non_tensor_batch["sandbox_runtime_fault"][0]
    # The tokens are all there, and none reaches the loss.
    assert [len(calls) for calls in server.calls.values()] == [2]
    assert int(data.batch["response_mask"].sum()) == 0
    # The score verl needs is a placeholder that does not move the group's baseline: the mean
    # of this task's graded rollouts in the process, 0.5 before any.
    # of this task's graded rollouts in the process (one gold, one null in the other tests),
    # 0.5 before any.
    assert data.batch["rm_scores"].sum().item() == 0.5


def test_on_fault_raise_fails_the_step_instead(
    bundled_tasks: list[Task], tokenizer: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _kill_the_grading_sandbox(monkeypatch)
    task = task_named(bundled_tasks, "csvline", "r2e")
    config = _config(
        [
            "+sandbox_runtime.backend=local",
            "+sandbox_runtime.tools=builtin",
            "+sandbox_runtime.on_fault=raise",
        ]
    )
    batch = _batch([task], tmp_path, tokenizer, config)
    server = ScriptedServer(tokenizer, [[_gold_reply(task), FINISH]])
    with pytest.raises(SandboxError, match="no reward: infrastructure error"):
        asyncio.run(_rollouts(_worker(config, server, tokenizer), batch))


def test_a_bad_setting_is_a_one_line_error_not_a_masked_sample(
    bundled_tasks: list[Task], tokenizer: Any, tmp_path: Path
) -> None:
    task = task_named(bundled_tasks, "csvline", "r2e")
    config = _config(["+sandbox_runtime.step_timeout=-1"])
    batch = _batch([task], tmp_path, tokenizer, config)
    worker = _worker(config, ScriptedServer(tokenizer, []), tokenizer)
    with pytest.raises(ConfigError, match="step_timeout") as caught:
        asyncio.run(_rollouts(worker, batch))
    assert "\n" not in str(caught.value)
