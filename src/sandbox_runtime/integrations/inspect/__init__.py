"""Inspect (``inspect-ai``) on every backend of this library: a sandbox environment and SWE tasks.

Importing this package registers the ``sandbox-runtime`` sandbox environment with Inspect;
Inspect imports it itself through this distribution's ``inspect_ai`` entry point, so a task
only names it::

    Task(..., sandbox=("sandbox-runtime", SandboxRuntimeConfig(backend="kubernetes")))
    inspect eval task.py --sandbox sandbox-runtime:sandbox-runtime.yaml

:mod:`~sandbox_runtime.integrations.inspect.swe` turns this library's SWE tasks into an
Inspect task graded by this library (docs/harnesses.md).
"""

from sandbox_runtime.integrations.inspect._config import SandboxRuntimeConfig
from sandbox_runtime.integrations.inspect._environment import (
    SANDBOX_NAME,
    SandboxRuntimeSandboxEnvironment,
)

__all__ = ["SANDBOX_NAME", "SandboxRuntimeConfig", "SandboxRuntimeSandboxEnvironment"]
