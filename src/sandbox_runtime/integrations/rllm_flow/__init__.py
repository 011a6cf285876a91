r"""rLLM main's plugin points: an ``AgentFlow`` and an ``Evaluator`` for SWE tasks.

Registered by this package's entry points as ``sandbox-runtime-swe`` in the ``rllm.agents``
and ``rllm.evaluators`` groups, so after ``pip install`` of this project beside rLLM main::

    rllm eval ./bench --agent sandbox-runtime-swe --evaluator sandbox-runtime-swe \\
        --base-url http://127.0.0.1:8000/v1 --model my-model

* :class:`SWEFlow` plays a task (R2E-Gym, SWE-bench, SWE-smith or this library's rows) in a
  sandbox of any backend of this library, with R2E-Gym's tools and observations, calling the
  model from the trainer's side.
* :class:`SWEEvaluator` grades the flow's diff by the task's own tests and raises when they
  give no verdict (rLLM records an ERROR episode; never a 0).
* :func:`write_benchmark` writes rows as a local rLLM benchmark directory.
* :mod:`.settings`: the backend and its options, from a file, the environment or the row.

Nothing here imports rLLM until a flow returns or an evaluator scores: the logic is tested
without it.  See docs/rllm-main.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sandbox_runtime.integrations.rllm_flow.evaluator import SWEEvaluator
from sandbox_runtime.integrations.rllm_flow.flow import FLOW_NAME, SWEFlow
from sandbox_runtime.integrations.rllm_flow.settings import FlowSettings, resolve_settings

__all__ = [
    "FLOW_NAME",
    "FlowSettings",
    "SWEEvaluator",
    "SWEFlow",
    "resolve_settings",
    "write_benchmark",
]

if TYPE_CHECKING:
    from sandbox_runtime.integrations.rllm_flow.benchmark import write_benchmark


def __getattr__(name: str) -> Any:
    # Imported on use, so ``python -m sandbox_runtime.integrations.rllm_flow.benchmark`` runs
    # the module once (not also as an attribute of the package).
    if name == "write_benchmark":
        from sandbox_runtime.integrations.rllm_flow.benchmark import write_benchmark

        return write_benchmark
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
