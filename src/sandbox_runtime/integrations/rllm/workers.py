"""Ray workers that build sandboxes: the credentials they need and the hooks installed in them.

rLLM trains inside Ray: environments and reward functions run in worker processes that
inherit neither the driver's environment (rLLM forwards only the prefixes in its
``FORWARD_PREFIXES``: ``VLLM_``, ``HF_``, ``CUDA_``, ... and no cloud credentials) nor what
the driver patched at run time (:func:`sandbox_runtime.integrations.r2egym.install`).
:func:`ray_runtime_env` builds the ``runtime_env`` for ``ray.init`` that carries both: rLLM's
own settings and hook, the backends' environment variables, and :func:`worker_setup` as the
``worker_process_setup_hook``, which runs rLLM's hook and then this library's installs.

Credentials travel only as environment variables (``TENCENTCLOUD_SECRET_ID``, ``E2B_API_KEY``,
...), as Ray carries every ``runtime_env``; the options handed to the workers must hold
none, so a secret never ends up in a JSON value that a log line might print.
"""

from __future__ import annotations

import importlib
import json
import os
from collections.abc import Mapping
from typing import Any

from sandbox_runtime.errors import ConfigError

__all__ = ["FORWARDED_PREFIXES", "SETUP_VARIABLE", "ray_runtime_env", "worker_setup"]

#: Environment variables the backends read, forwarded to every worker.
FORWARDED_PREFIXES = (
    "TENCENTCLOUD_",
    "E2B_",
    "AGS_",
    "SANDBOX_RUNTIME_",
    "KUBECONFIG",
    "DOCKER_",
)
#: What :func:`worker_setup` installs, as JSON in the workers' environment.
SETUP_VARIABLE = "SANDBOX_RUNTIME_WORKER_SETUP"
_SECRET_WORDS = ("secret", "key", "token", "password")


def _refuse_secrets(options: Mapping[str, Any], where: str) -> None:
    for name in options:
        if any(word in name.lower() for word in _SECRET_WORDS):
            raise ConfigError(
                f"{where}: {name!r} looks like a credential; set it in the environment "
                "(TENCENTCLOUD_SECRET_KEY, E2B_API_KEY, ...), which reaches every worker"
            )


def ray_runtime_env(
    *,
    r2egym_backend: str | None = None,
    r2egym_options: Mapping[str, Any] | None = None,
    install_r2egym: bool = False,
    rllm_sandbox_options: Mapping[str, Mapping[str, Any]] | None = None,
    environ: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The ``runtime_env`` for ``ray.init`` (call it before rLLM's trainer starts Ray).

    Starts from rLLM's own (``get_ppo_ray_runtime_env``) when rLLM is importable; adds the
    variables in :data:`FORWARDED_PREFIXES`; sets :func:`worker_setup` as the hook, which
    installs :class:`~sandbox_runtime.integrations.r2egym.R2EGymRuntime` (with
    ``install_r2egym`` or a ``r2egym_backend``) and the ``sandbox-runtime:<backend>`` names
    of rLLM's ``create_sandbox`` in each worker.
    """
    source = os.environ if environ is None else environ
    try:
        from rllm.trainer.verl.ray_runtime_env import get_ppo_ray_runtime_env
    except ImportError:
        runtime_env: dict[str, Any] = {"env_vars": {}}
    else:
        runtime_env = dict(get_ppo_ray_runtime_env())
    env_vars = dict(runtime_env.get("env_vars") or {})
    env_vars.update(
        {key: value for key, value in source.items() if key.startswith(FORWARDED_PREFIXES)}
    )
    _refuse_secrets(r2egym_options or {}, "r2egym_options")
    for name, options in (rllm_sandbox_options or {}).items():
        _refuse_secrets(options, f"rllm_sandbox_options[{name!r}]")
    setup: dict[str, Any] = {
        "previous_hook": runtime_env.get("worker_process_setup_hook"),
        "rllm_sandbox_options": {k: dict(v) for k, v in (rllm_sandbox_options or {}).items()},
    }
    if install_r2egym or r2egym_backend is not None:
        setup["r2egym"] = {"backend": r2egym_backend, "backend_options": dict(r2egym_options or {})}
    env_vars[SETUP_VARIABLE] = json.dumps(setup)
    runtime_env["env_vars"] = env_vars
    runtime_env["worker_process_setup_hook"] = f"{__name__}.worker_setup"
    return runtime_env


def _call(path: str) -> None:
    module, _, name = path.rpartition(".")
    getattr(importlib.import_module(module), name)()


def worker_setup() -> None:
    """Ray's ``worker_process_setup_hook``: rLLM's hook, then this library's installs.

    Reads :data:`SETUP_VARIABLE`; what is not importable in the worker (rLLM's sandbox
    package, R2E-Gym) is skipped only when it was not asked for.
    """
    setup = json.loads(os.environ.get(SETUP_VARIABLE) or "{}")
    previous = setup.get("previous_hook")
    if previous and previous != f"{__name__}.worker_setup":
        _call(previous)  # rLLM's own (its verl patches), as its trainer would have set it
    if "r2egym" in setup:
        from sandbox_runtime.integrations import r2egym

        r2egym.install(**setup["r2egym"])
    from sandbox_runtime.integrations.rllm.sandbox import install

    try:
        install(backend_options=setup.get("rllm_sandbox_options") or None)
    except ConfigError:
        if setup.get("rllm_sandbox_options"):
            raise
