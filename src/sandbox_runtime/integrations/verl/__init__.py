"""verl's agent loop on this library's sandboxes: ``sandbox_runtime_swe``.

verl 0.9 runs multi-turn rollouts through agent loops (``verl.experimental.agent_loop``):
classes registered by name whose async ``run`` talks to the rollout servers at token level
(``server_manager.generate``) and returns prompt and response token ids, a response mask and a
reward.  :class:`~sandbox_runtime.integrations.verl.agent_loop.SWEAgentLoop` plays one SWE task
per call: its sandbox on any backend, the R2E-Gym-style tools, grading in a fresh sandbox.

The package ships the YAML file verl's ``actor_rollout_ref.rollout.agent.agent_loop_config_path``
names (:data:`AGENT_LOOP_CONFIG`); ``python -m sandbox_runtime.integrations.verl`` prints its
path, so the override is one line.  Importing this package does not import verl; the loop's
module does.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["AGENT_LOOP_CONFIG", "AGENT_LOOP_NAME"]

#: The agent-loop file verl reads (``name`` and ``_target_`` per entry).
AGENT_LOOP_CONFIG = Path(__file__).with_name("agent_loop.yaml")
#: The name the file registers (``agent.default_agent_loop`` or a row's ``agent_name``).
AGENT_LOOP_NAME = "sandbox_runtime_swe"
