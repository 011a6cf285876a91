"""A training smoke test whose rewards come from sandboxes: no hub, no pretrained weights.

    python examples/train/gpu_smoke.py --out /tmp/smoke           # GPU: verl GRPO, vLLM rollouts
    python examples/train/gpu_smoke.py --out /tmp/smoke --cpu     # CPU: the same data and model

Both parts build the same things first: a byte-level BPE tokenizer trained on the bundled
tasks' text, a tiny randomly initialised Qwen2 model, and the bundled tasks as verl parquet
(``tasks rllm --prompt patch``: the issue as chat messages, the task row in ``extra_info``).

* ``--cpu`` (what CI runs): samples responses from the tiny model, scores them together with
  the gold diffs through verl's own reward manager and :func:`compute_score` (each response
  graded in a fresh sandbox), and makes a few GRPO updates (group-normalised advantages,
  policy gradient) with those rewards; it checks that the gold diffs score 1, the random
  model's text 0, and that the updates raise the likelihood of the rewarded responses.
* the GPU part runs ``verl.trainer.main_ppo`` with GRPO for a few steps on the same model and
  data, rollouts by vLLM, rewards by :func:`compute_score` on ``--backend``.

Prints one JSON line of results at the end.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import sandbox_runtime.swe.patch_reward as patch_reward
from sandbox_runtime.swe import Task, read_rows
from sandbox_runtime.swe.dataset import load_rows
from sandbox_runtime.swe.parquet import PromptMode, write_rllm_parquet

CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)


def gold_response(task: Task) -> str:
    """What a perfect policy would answer: the reference fix in a fenced diff."""
    return f"Here is the fix.\n```diff\n{task.gold_patch}```"


def build(out: Path) -> dict[str, Any]:
    """Tokenizer, tiny model and parquet under ``out``; returns their paths."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    tasks = read_rows(load_rows("bundled")).tasks
    texts = [t.problem_statement for t in tasks] + [gold_response(t) for t in tasks]
    model = Tokenizer(models.BPE())
    model.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    model.decoder = decoders.ByteLevel()
    specials = ["<|pad|>", "<|endoftext|>", "<|system|>", "<|user|>", "<|assistant|>"]
    trainer = trainers.BpeTrainer(
        vocab_size=1024,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    model.train_from_iterator(texts, trainer=trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=model, pad_token="<|pad|>", eos_token="<|endoftext|>"
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=4096,
        tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=tokenizer.eos_token_id,
    )
    model_dir = out / "model"
    Qwen2ForCausalLM(config).save_pretrained(model_dir)
    tokenizer.save_pretrained(model_dir)
    data_dir = out / "data"
    for split in ("train", "test"):
        write_rllm_parquet(tasks, data_dir, split=split, prompt=PromptMode.PATCH)
    return {
        "model": model_dir,
        "train": data_dir / "train_verl.parquet",
        "test": data_dir / "test_verl.parquet",
    }


def cpu_part(paths: dict[str, Any], backend: str, updates: int) -> dict[str, Any]:
    """Sample, score through verl's reward manager, and make GRPO updates on the CPU."""
    import numpy as np
    import pandas as pd
    import torch
    from transformers import AutoTokenizer, Qwen2ForCausalLM
    from verl.workers.reward_manager.naive import NaiveRewardManager

    from verl import DataProto

    torch.manual_seed(0)
    tokenizer = AutoTokenizer.from_pretrained(paths["model"])
    policy = Qwen2ForCausalLM.from_pretrained(paths["model"])
    rows = pd.read_parquet(paths["train"]).head(2)
    tasks = {t.task_id: t for t in read_rows(load_rows("bundled")).tasks}
    score = NaiveRewardManager(
        tokenizer,
        0,
        compute_score=lambda **kw: patch_reward.compute_score(**kw, backend=backend),
    )

    def reward(row: Any, response: str) -> float:
        ids = tokenizer(response, add_special_tokens=False)["input_ids"]
        batch = DataProto.from_dict(
            tensors={
                "prompts": torch.ones((1, 1), dtype=torch.long),
                "responses": torch.tensor([ids]),
                "attention_mask": torch.ones((1, 1 + len(ids)), dtype=torch.long),
            },
            non_tensors={
                "data_source": np.array([row["data_source"]], dtype=object),
                "reward_model": np.array([row["reward_model"]], dtype=object),
                "extra_info": np.array([dict(row["extra_info"])], dtype=object),
            },
        )
        return float(score(batch).sum().item())

    groups = []
    for _, row in rows.iterrows():
        prompt = tokenizer.apply_chat_template(
            list(row["prompt"]), add_generation_prompt=True, tokenize=False
        )
        prompt_ids = tokenizer(prompt, return_tensors="pt")["input_ids"][:, -256:]
        sampled = policy.generate(
            prompt_ids, do_sample=True, max_new_tokens=24, num_return_sequences=2
        )
        responses = [
            tokenizer.decode(s[prompt_ids.shape[1] :], skip_special_tokens=True) for s in sampled
        ]
        responses.append(gold_response(tasks[row["reward_model"]["ground_truth"]]))
        rewards = [reward(row, response) for response in responses]
        groups.append((prompt_ids, responses, rewards))

    def logprob(prompt_ids: torch.Tensor, response: str) -> torch.Tensor:
        answer = tokenizer(response, add_special_tokens=False, return_tensors="pt")["input_ids"]
        ids = torch.cat([prompt_ids, answer], dim=1)
        logits = policy(ids).logits[:, prompt_ids.shape[1] - 1 : -1]
        picked = torch.log_softmax(logits, -1).gather(-1, answer.unsqueeze(-1))
        return picked.mean()

    def rewarded_logprob() -> float:
        with torch.no_grad():
            values = [
                float(logprob(p, r).item())
                for p, responses, rewards in groups
                for r, value in zip(responses, rewards, strict=True)
                if value > 0
            ]
        return sum(values) / len(values)

    before = rewarded_logprob()
    optimizer = torch.optim.AdamW(policy.parameters(), lr=1e-3)
    for _ in range(updates):
        optimizer.zero_grad()
        loss = torch.zeros(())
        for prompt_ids, responses, rewards in groups:
            values = torch.tensor(rewards)
            advantages = (values - values.mean()) / (values.std() + 1e-6)  # GRPO's group norm
            for response, advantage in zip(responses, advantages, strict=True):
                loss = loss - advantage * logprob(prompt_ids, response)
        loss.backward()
        optimizer.step()
    after = rewarded_logprob()
    return {
        "rewards": [rewards for _, _, rewards in groups],
        "rewarded_logprob_before": before,
        "rewarded_logprob_after": after,
        "updates": updates,
    }


def gpu_command(paths: dict[str, Any], out: Path, backend: str, steps: int) -> list[str]:
    """verl's own PPO entry point with GRPO on one GPU, for ``steps`` steps."""
    return [
        sys.executable,
        "-m",
        "verl.trainer.main_ppo",
        "algorithm.adv_estimator=grpo",
        f"data.train_files={paths['train']}",
        f"data.val_files={paths['test']}",
        "data.train_batch_size=4",
        "data.max_prompt_length=1024",
        "data.max_response_length=256",
        "data.truncation=left",
        f"actor_rollout_ref.model.path={paths['model']}",
        "actor_rollout_ref.actor.optim.lr=1e-4",
        "actor_rollout_ref.actor.ppo_mini_batch_size=4",
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4",
        "actor_rollout_ref.actor.use_kl_loss=False",
        "actor_rollout_ref.rollout.name=vllm",
        "actor_rollout_ref.rollout.n=4",
        "actor_rollout_ref.rollout.tensor_model_parallel_size=1",
        "actor_rollout_ref.rollout.gpu_memory_utilization=0.3",
        "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=4",
        "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=4",
        f"custom_reward_function.path={patch_reward.__file__}",
        "custom_reward_function.name=compute_score",
        f"+custom_reward_function.reward_kwargs.backend={backend}",
        "trainer.n_gpus_per_node=1",
        "trainer.nnodes=1",
        f"trainer.total_training_steps={steps}",
        "trainer.val_before_train=False",
        "trainer.test_freq=-1",
        "trainer.save_freq=-1",
        "trainer.logger=['console']",
        f"trainer.default_local_dir={out / 'checkpoints'}",
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="working directory")
    parser.add_argument("--cpu", action="store_true", help="the CPU part only (what CI runs)")
    parser.add_argument("--backend", default="local", help="sandbox backend for the rewards")
    parser.add_argument("--steps", type=int, default=3, help="GRPO updates / verl steps")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    paths = build(args.out)
    if args.cpu:
        result = cpu_part(paths, args.backend, args.steps)
        ok = (
            all(rewards[-1] == 1.0 for rewards in result["rewards"])
            and all(r == 0.0 for rewards in result["rewards"] for r in rewards[:-1])
            and result["rewarded_logprob_after"] > result["rewarded_logprob_before"]
        )
    else:
        done = subprocess.run(gpu_command(paths, args.out, args.backend, args.steps), check=False)
        result, ok = {"verl_exit_code": done.returncode}, done.returncode == 0
    print(json.dumps({"ok": ok, **result}))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
