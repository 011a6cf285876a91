"""``python -m tests.harnesses._hold_sandbox swe-rex|harbor LABEL BASE_DIR``.

Opens a ``local`` sandbox through the harness's own entry (SWE-ReX: the deployment's
``start``; Harbor: the environment's ``start``, over Harbor's own base class where Harbor
imports, else over the interface double) and waits, so a test can kill this process with
SIGKILL (``_killed``).
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path


async def _swerex(label: str, base_dir: str) -> None:
    from sandbox_runtime.integrations.swerex import SandboxRuntimeDeployment

    deployment = SandboxRuntimeDeployment(
        backend="local", backend_options={"base_dir": base_dir}, labels={"test-run": label}
    )
    await deployment.start()
    await asyncio.sleep(600)


async def _harbor(label: str, base_dir: str) -> None:
    from tests.harnesses.harbor_double import (
        harbor_imports,
        install_interface_double,
        trial_arguments,
    )

    if not harbor_imports():
        install_interface_double()
    from sandbox_runtime.integrations.harbor import SandboxRuntimeEnvironment

    trial_paths, task_env_config = trial_arguments(Path(base_dir) / "trial", None)
    environment = SandboxRuntimeEnvironment(
        environment_dir=Path(base_dir) / "environment",
        environment_name="hold",
        session_id=f"hold__{label}",
        trial_paths=trial_paths,
        task_env_config=task_env_config,
        backend="local",
        backend_options={"base_dir": base_dir},
        labels={"test-run": label},
    )
    await environment.start(force_build=False)
    await asyncio.sleep(600)


if __name__ == "__main__":
    harness, label, base_dir = sys.argv[1:]
    asyncio.run({"swe-rex": _swerex, "harbor": _harbor}[harness](label, base_dir))
