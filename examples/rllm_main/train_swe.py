"""Train on SWE tasks with rLLM main's ``AgentTrainer`` and this project's flow and evaluator.

GPU-only for the verl backend (tinker and fireworks are remote services).  From a venv with
rLLM main (``[verl]`` extra for verl) and this project installed (docs/rllm-main.md)::

    python examples/rllm_main/train_swe.py rllm/backend=verl \\
        +rows=bundled +backend=docker \\
        rllm.compact_filtering.enable=true rllm.compact_filtering.mask_error=true \\
        rllm.workflow.raise_on_error=false \\
        actor_rollout_ref.model.path=Qwen/Qwen3-0.6B +model.name=Qwen/Qwen3-0.6B ...

``+rows`` is any row source of ``sandbox-runtime tasks`` (``bundled``, a JSONL file,
``hf:R2E-Gym/R2E-Gym-Subset``, ...); ``+backend`` / ``+backend_options`` (a JSON object) go
into every row's ``sandbox_runtime`` settings, so every Ray worker that runs a rollout opens its
sandbox where the data says.  The compact-filtering overrides drop ERROR episodes (a sandbox
or grading fault) from the update instead of stopping the run.
"""

from __future__ import annotations

import json
from typing import Any

import hydra
from omegaconf import DictConfig
from rllm.data.dataset import Dataset
from rllm.trainer import AgentTrainer

from sandbox_runtime.integrations.rllm_flow import SWEEvaluator, SWEFlow
from sandbox_runtime.integrations.rllm_flow.benchmark import benchmark_row
from sandbox_runtime.swe import read_rows
from sandbox_runtime.swe.dataset import load_rows


def rows(config: DictConfig) -> list[dict[str, Any]]:
    """The tasks as rLLM dataset rows, each carrying the run's sandbox settings."""
    settings: dict[str, Any] = {"backend": config.get("backend", "docker")}
    if config.get("backend_options"):
        settings["backend_options"] = json.loads(config.backend_options)
    read = read_rows(load_rows(config.get("rows", "bundled")))
    if read.errors:
        raise SystemExit(f"bad rows: {read.errors[0]}")
    return [benchmark_row(task, settings) for task in read.tasks]


@hydra.main(config_path="pkg://rllm.trainer.config", config_name="unified", version_base=None)  # type: ignore[untyped-decorator,unused-ignore]
def main(config: DictConfig) -> None:
    data = rows(config)
    trainer = AgentTrainer(
        backend=config.rllm.get("backend", "verl"),
        agent_flow=SWEFlow(),
        evaluator=SWEEvaluator(),
        config=config,
        train_dataset=Dataset(data=data, name="sandbox-runtime-swe", split="train"),
        val_dataset=Dataset(data=data, name="sandbox-runtime-swe", split="test"),
    )
    trainer.train()


if __name__ == "__main__":
    main()
