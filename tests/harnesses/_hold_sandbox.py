"""``python -m tests.harnesses._hold_sandbox swe-rex|harbor LABEL BASE_DIR``.

Opens a ``local`` sandbox through the harness's own entry (SWE-ReX: the deployment's
``start``; Harbor: the environment's ``start``, over the interface double where Harbor does
not import) and waits, so a test can kill this process with SIGKILL (``_killed``).
"""

from __future__ import annotations

import asyncio
import sys
import types
from pathlib import Path


async def _swerex(label: str, base_dir: str) -> None:
    from sandbox_runtime.integrations.swerex import SandboxRuntimeDeployment

    deployment = SandboxRuntimeDeployment(
        backend="local", backend_options={"base_dir": base_dir}, labels={"test-run": label}
    )
    await deployment.start()
    await asyncio.sleep(600)


async def _harbor(label: str, base_dir: str) -> None:
    from tests.harnesses.harbor_double import harbor_imports, install_interface_double

    if not harbor_imports():
        install_interface_double()
    from sandbox_runtime.integrations.harbor import SandboxRuntimeEnvironment

    environment = SandboxRuntimeEnvironment(
        environment_dir=Path(base_dir) / "environment",
        environment_name="hold",
        session_id=f"hold__{label}",
        trial_paths=None,
        task_env_config=types.SimpleNamespace(docker_image=None, cpus=1, memory_mb=1024, env={}),
        backend="local",
        backend_options={"base_dir": base_dir},
        labels={"test-run": label},
    )
    await environment.start(force_build=False)
    await asyncio.sleep(600)


if __name__ == "__main__":
    harness, label, base_dir = sys.argv[1:]
    asyncio.run({"swe-rex": _swerex, "harbor": _harbor}[harness](label, base_dir))
