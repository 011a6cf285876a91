"""The runtime_env for Ray workers: credentials forwarded, rLLM's hook kept, ours installed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sandbox_runtime import ConfigError
from sandbox_runtime.integrations import r2egym
from sandbox_runtime.integrations.r2egym import R2EGymRuntime
from sandbox_runtime.integrations.rllm import ray_runtime_env, worker_setup
from sandbox_runtime.integrations.rllm.workers import SETUP_VARIABLE
from tests.integrations.test_r2egym import _fake_r2egym, _no_r2egym_left

__all__ = ["_no_r2egym_left"]  # the autouse fixture, here too

CALLS: list[str] = []


def previous_hook() -> None:
    """Stands for rLLM's own worker hook (its verl patches)."""
    CALLS.append("previous")


def test_credentials_reach_workers_and_secrets_stay_out_of_options() -> None:
    environ = {
        "TENCENTCLOUD_SECRET_ID": "id-1",
        "TENCENTCLOUD_SECRET_KEY": "key-1",
        "E2B_API_KEY": "e2b-1",
        "KUBECONFIG": "/k/config",
        "HOME": "/root",
        "OPENAI_API_KEY": "not ours",
    }
    env = ray_runtime_env(
        r2egym_backend="ags", r2egym_options={"tool_name": "swe"}, environ=environ
    )
    hook = env["worker_process_setup_hook"]
    assert hook == "sandbox_runtime.integrations.rllm.workers.worker_setup"
    forwarded = env["env_vars"]
    for name in ("TENCENTCLOUD_SECRET_ID", "TENCENTCLOUD_SECRET_KEY", "E2B_API_KEY", "KUBECONFIG"):
        assert forwarded[name] == environ[name]
    assert "HOME" not in forwarded
    assert "OPENAI_API_KEY" not in forwarded
    setup = json.loads(forwarded[SETUP_VARIABLE])
    assert setup["r2egym"] == {"backend": "ags", "backend_options": {"tool_name": "swe"}}
    assert "key-1" not in forwarded[SETUP_VARIABLE]
    with pytest.raises(ConfigError, match="'secret_key' looks like a credential"):
        ray_runtime_env(r2egym_options={"secret_key": "key-1"}, environ=environ)
    with pytest.raises(ConfigError, match="api_key"):
        ray_runtime_env(rllm_sandbox_options={"ags": {"api_key": "x"}}, environ=environ)


def test_worker_setup_runs_the_previous_hook_then_installs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fake_r2egym(tmp_path / "site")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    setup = {
        "previous_hook": f"{__name__}.previous_hook",
        "r2egym": {"backend": "local", "backend_options": {}},
    }
    monkeypatch.setenv(SETUP_VARIABLE, json.dumps(setup))
    CALLS.clear()
    try:
        worker_setup()  # without rLLM's sandbox package: that part is skipped, not asked for
        from r2egym.agenthub.environment import env

        assert CALLS == ["previous"]
        assert issubclass(env.DockerRuntime, R2EGymRuntime)
    finally:
        r2egym.uninstall()
    monkeypatch.setenv(SETUP_VARIABLE, json.dumps({"rllm_sandbox_options": {"ags": {}}}))
    with pytest.raises(ConfigError, match="needs rLLM"):
        worker_setup()  # asked for, and rLLM is not here: said, not skipped
