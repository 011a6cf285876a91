"""GRPO with verl on SWE tasks through rLLM main's own plugin points (today's stack).

rLLM main (9beb6e0f) takes agents and evaluators by name: this project registers its SWE
``AgentFlow`` under the ``rllm.agents`` entry point ``sandbox-runtime-swe`` and its evaluator
under ``rllm.evaluators`` (docs/rllm-main.md). ``rllm train`` trains through the Tinker service
only, so verl on local GPUs goes through the Python API with the same two names, looked up by
rLLM's own loaders (built-in catalog, ``~/.rllm/agents.json``, then the entry points).

Datasets come from rLLM's registry (``sandbox-runtime tasks rllm SOURCE --register NAME``),
named by ``+sandbox_runtime.train_dataset`` / ``+sandbox_runtime.val_dataset``. Run it through
``run_rllm_main.sh``; see docs/training.md.
"""

from __future__ import annotations

from typing import Any

import hydra
from omegaconf import DictConfig, OmegaConf

#: The entry-point name of both the flow and the evaluator (pyproject.toml).
PLUGIN = "sandbox-runtime-swe"


def _settings(config: DictConfig) -> dict[str, Any]:
    found = OmegaConf.to_container(config.get("sandbox_runtime") or OmegaConf.create({}))
    settings: dict[str, Any] = {"train_dataset": "R2E_Gym_Subset", "val_dataset": None}
    settings.update(found if isinstance(found, dict) else {})
    return settings


def _dataset(name: str, split: str) -> Any:
    from rllm.data import DatasetRegistry

    dataset = DatasetRegistry.load_dataset(name, split)
    if dataset is None:
        raise SystemExit(
            f"dataset {name!r} split {split!r} is not in rLLM's registry: "
            f"sandbox-runtime tasks rllm SOURCE --register {name} --split {split}"
        )
    return dataset


@hydra.main(  # type: ignore[untyped-decorator]
    config_path="pkg://rllm.trainer.config", config_name="unified", version_base=None
)
def main(config: DictConfig) -> None:
    from rllm.eval.agent_loader import load_agent
    from rllm.eval.evaluator_loader import load_evaluator
    from rllm.trainer import AgentTrainer

    settings = _settings(config)
    train = _dataset(settings["train_dataset"], "train")
    val_name = settings["val_dataset"] or settings["train_dataset"]
    val = _dataset(val_name, "test" if settings["val_dataset"] else "train")
    trainer = AgentTrainer(
        config=config,
        train_dataset=train,
        val_dataset=val,
        backend="verl",
        agent_flow=load_agent(PLUGIN),
        evaluator=load_evaluator(PLUGIN),
    )
    trainer.train()


if __name__ == "__main__":
    main()
