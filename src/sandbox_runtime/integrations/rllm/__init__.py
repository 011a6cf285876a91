"""rLLM (and verl behind it): the SWE environment, rLLM's ``Sandbox`` protocol, datasets.

* :class:`SWEEnv`: rLLM's SWE environment on any backend, with R2E-Gym's tools and
  observations (``rllm.env.name`` set to this class; ``+rllm.env.env_args.backend=ags``).
* :class:`RLLMSandbox` and :func:`install`: rLLM's newer ``Sandbox`` protocol over any backend,
  selected in rLLM as ``sandbox-runtime:<backend>``.
* :func:`ray_runtime_env` and :func:`worker_setup`: credentials and these installs in every
  Ray worker (``ray.init(runtime_env=ray_runtime_env(...))`` before rLLM's trainer).
* :func:`register_tasks`: tasks into rLLM's ``DatasetRegistry`` with verl-ready files
  (``sandbox-runtime tasks rllm --register NAME``).

Nothing here imports rLLM until it is used; the classes work and are tested without it.
"""

from __future__ import annotations

from sandbox_runtime.integrations.rllm.datasets import register_tasks
from sandbox_runtime.integrations.rllm.env import SWEEnv
from sandbox_runtime.integrations.rllm.sandbox import (
    BACKEND_PREFIX,
    CommandFailedError,
    RLLMSandbox,
    install,
)
from sandbox_runtime.integrations.rllm.workers import ray_runtime_env, worker_setup

__all__ = [
    "BACKEND_PREFIX",
    "CommandFailedError",
    "RLLMSandbox",
    "SWEEnv",
    "install",
    "ray_runtime_env",
    "register_tasks",
    "worker_setup",
]
