"""PPO on R2E-Gym tasks with rLLM + verl, every rollout in a sandbox of this library.

The seeds' ``train.py``, with the sandbox part swapped: the same ``AgentTrainer``, the same
Hydra overrides, and ``+rllm.env.env_args.backend=ags`` (or ``docker``, ``kubernetes``;
``local`` only with namespaced isolation) picks where each rollout's sandbox runs. Needs the
seeds' stack (rLLM 4762c2dd: rLLM main has no ``rllm.agents.swe_agent``). Two environments,
chosen with ``+sandbox_runtime.env=...``:

* ``ours`` (default): :class:`sandbox_runtime.integrations.rllm.SWEEnv`, R2E-Gym's tools and
  observation framing over any backend, grading by this library (no R2E-Gym needed);
* ``r2egym``: rLLM's own ``rllm.environments.swe.swe.SWEEnv`` and R2E-Gym's ``RepoEnv``
  unchanged, with R2E-Gym's runtime replaced in every Ray worker by
  :class:`sandbox_runtime.integrations.r2egym.R2EGymRuntime`.

Datasets come from rLLM's registry (``sandbox-runtime tasks rllm SOURCE --register NAME``,
names given by ``+sandbox_runtime.train_dataset`` / ``+sandbox_runtime.val_dataset``).
Run it through ``run_ags.sh``; see docs/training.md.
"""

from __future__ import annotations

from typing import Any

import hydra
import ray
from omegaconf import DictConfig, OmegaConf

from sandbox_runtime.integrations.rllm import ray_runtime_env


def _settings(config: DictConfig) -> dict[str, Any]:
    found = OmegaConf.to_container(config.get("sandbox_runtime") or OmegaConf.create({}))
    settings = {"env": "ours", "train_dataset": "R2E_Gym_Subset", "val_dataset": None}
    settings.update(found if isinstance(found, dict) else {})
    return settings


@hydra.main(  # type: ignore[untyped-decorator]
    config_path="pkg://rllm.trainer.config", config_name="agent_ppo_trainer", version_base=None
)
def main(config: DictConfig) -> None:
    from rllm.agents.swe_agent import SWEAgent
    from rllm.data import DatasetRegistry
    from rllm.trainer.agent_trainer import AgentTrainer

    settings = _settings(config)
    env_args = OmegaConf.to_container(config.rllm.env.get("env_args") or OmegaConf.create({}))
    env_args = env_args if isinstance(env_args, dict) else {}
    backend = env_args.get("backend")
    if settings["env"] == "r2egym":
        from rllm.environments.swe.swe import SWEEnv as env_class

        # rLLM's SWEEnv hands RepoEnv the backend name; the options go with the install.
        options = env_args.get("backend_options") or {}
        runtime_env = ray_runtime_env(install_r2egym=True, r2egym_options=options)
    else:
        from sandbox_runtime.integrations.rllm import SWEEnv as env_class

        runtime_env = ray_runtime_env()
    # Started here, not by AgentTrainer, so that every worker gets the backends' credentials
    # (rLLM forwards only VLLM_, HF_, CUDA_, ... variables) and this library's installs.
    if not ray.is_initialized():
        init = {k: v for k, v in (config.get("ray_init") or {}).items() if v is not None}
        ray.init(runtime_env=runtime_env, **init)
    print(f"sandbox-runtime: env={settings['env']} backend={backend or 'the env default'}")

    train = DatasetRegistry.load_dataset(settings["train_dataset"], "train")
    val_name = settings["val_dataset"] or settings["train_dataset"]
    val = DatasetRegistry.load_dataset(val_name, "test" if settings["val_dataset"] else "train")
    trainer = AgentTrainer(
        agent_class=SWEAgent,
        env_class=env_class,
        config=config,
        train_dataset=train,
        val_dataset=val,
    )
    trainer.train()


if __name__ == "__main__":
    main()
