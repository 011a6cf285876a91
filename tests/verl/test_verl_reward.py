"""verl's own reward managers, from PyPI on the CPU, score the project's parquet.

The config is verl's own (``ppo_trainer.yaml`` composed by Hydra) with the keys a user sets,
``custom_reward_function.path/name/reward_kwargs``, migrated by verl's own code; the
responses are token ids of a tokenizer trained here (no hub), decoded by the managers.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import torch
from hydra import compose, initialize_config_dir
from tokenizers import Tokenizer, models, pre_tokenizers, trainers
from tokenizers import decoders as tk_decoders
from transformers import PreTrainedTokenizerFast
from verl.experimental.reward_loop.reward_loop import migrate_legacy_reward_impl
from verl.trainer.ppo.reward import load_reward_manager

import sandbox_runtime.swe.patch_reward as patch_reward
import verl
from sandbox_runtime.swe import read_rows
from sandbox_runtime.swe.dataset import load_rows
from sandbox_runtime.swe.grading import GradingError
from sandbox_runtime.swe.parquet import PromptMode, write_rllm_parquet
from verl import DataProto

WRONG = "diff --git a/README.md b/README.md\n--- a/README.md\n+++ b/README.md\n@@ -1 +1,2 @@\n"


@pytest.fixture(scope="module")
def rows(tmp_path_factory: pytest.TempPathFactory) -> pd.DataFrame:
    tasks = read_rows(load_rows("bundled")).tasks
    out = tmp_path_factory.mktemp("parquet")
    write_rllm_parquet(tasks, out, split="train", prompt=PromptMode.PATCH)
    files = sorted(out.glob("*_verl.parquet"))
    assert files, sorted(p.name for p in out.iterdir())
    return pd.concat([pd.read_parquet(f) for f in files], ignore_index=True)


def _tokenizer(texts: list[str]) -> PreTrainedTokenizerFast:
    """A byte-level BPE trained on the rows' own text: decoding gives the text back."""
    model = Tokenizer(models.BPE())
    model.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    model.decoder = tk_decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=600,
        special_tokens=["<pad>", "<eos>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    model.train_from_iterator(texts, trainer=trainer)
    return PreTrainedTokenizerFast(tokenizer_object=model, pad_token="<pad>", eos_token="<eos>")


def _config(**reward_kwargs: Any) -> Any:
    """verl's trainer config as a user's Hydra overrides set it, migrated as verl does."""
    config_dir = Path(verl.__file__).parent / "trainer" / "config"
    kwargs = [f"+custom_reward_function.reward_kwargs.{k}={v}" for k, v in reward_kwargs.items()]
    with initialize_config_dir(config_dir=str(config_dir), version_base=None):
        config = compose(
            config_name="ppo_trainer",
            overrides=[
                f"custom_reward_function.path={patch_reward.__file__}",
                "custom_reward_function.name=compute_score",
                *kwargs,
            ],
        )
    return migrate_legacy_reward_impl(config)


def _batch(tokenizer: PreTrainedTokenizerFast, row: pd.Series, response: str) -> DataProto:
    ids = tokenizer(response, add_special_tokens=False)["input_ids"]
    assert tokenizer.decode(ids, skip_special_tokens=True) == response
    responses = torch.tensor([ids + [tokenizer.pad_token_id] * 3])
    prompt = torch.ones((1, 4), dtype=torch.long)
    mask = torch.cat([prompt, torch.tensor([[1] * len(ids) + [0] * 3])], dim=1)
    return DataProto.from_dict(
        tensors={"prompts": prompt, "responses": responses, "attention_mask": mask},
        non_tensors={
            "data_source": np.array([row["data_source"]], dtype=object),
            "reward_model": np.array([row["reward_model"]], dtype=object),
            "extra_info": np.array([dict(row["extra_info"])], dtype=object),
        },
    )


def test_reward_loop_manager_scores_gold_one_and_wrong_zero(
    rows: pd.DataFrame, tmp_path: Path
) -> None:
    tasks = {t.task_id: t for t in read_rows(load_rows("bundled")).tasks}
    sample = rows.iloc[0]
    task = tasks[sample["reward_model"]["ground_truth"]]
    assert sample["data_source"].startswith("sandbox-runtime/")
    assert sample["prompt"][-1]["role"] == "user"
    gold = f"The fix:\n```diff\n{task.gold_patch}```"
    wrong = f"```diff\n{WRONG}```"
    tokenizer = _tokenizer([gold, wrong, task.problem_statement])
    config = _config(backend="local")
    assert config.reward.custom_reward_function.reward_kwargs.backend == "local"
    manager = load_reward_manager(config, tokenizer)

    def score(response: str) -> float:
        result = manager.loop.run_until_complete(
            manager.run_single(_batch(tokenizer, sample, response))
        )
        return float(result["reward_score"])

    assert score(gold) == 1.0
    assert score(wrong) == 0.0


def test_a_sandbox_fault_fails_the_step_instead_of_scoring_zero(
    rows: pd.DataFrame, tmp_path: Path
) -> None:
    tasks = {t.task_id: t for t in read_rows(load_rows("bundled")).tasks}
    sample = rows.iloc[0]
    gold = f"```diff\n{tasks[sample['reward_model']['ground_truth']].gold_patch}```"
    tokenizer = _tokenizer([gold])
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    config = _config(
        backend="local", retries=0, **{"backend_options.base_dir": str(blocker / "sandboxes")}
    )
    manager = load_reward_manager(config, tokenizer)
    with pytest.raises(GradingError, match="infrastructure error"):
        manager.loop.run_until_complete(manager.run_single(_batch(tokenizer, sample, gold)))


def test_legacy_naive_manager_over_a_batch(rows: pd.DataFrame) -> None:
    """verl's older ``NaiveRewardManager`` (``__call__`` over a batch), still shipped."""
    from verl.trainer.ppo.reward import get_custom_reward_fn
    from verl.workers.reward_manager.naive import NaiveRewardManager

    tasks = {t.task_id: t for t in read_rows(load_rows("bundled")).tasks}
    sample = rows.iloc[1]
    gold = f"```diff\n{tasks[sample['reward_model']['ground_truth']].gold_patch}```"
    tokenizer = _tokenizer([gold, WRONG])
    config = _config(backend="local")
    manager = NaiveRewardManager(tokenizer, 0, compute_score=get_custom_reward_fn(config))
    scores = [
        manager(_batch(tokenizer, sample, response))[0, :].sum().item()
        for response in (gold, f"```diff\n{WRONG}```")
    ]
    assert scores == [1.0, 0.0]
