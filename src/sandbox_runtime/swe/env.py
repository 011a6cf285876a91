"""Where :class:`SWEEnv` used to live; it is :mod:`sandbox_runtime.integrations.rllm` now.

Kept so that ``from sandbox_runtime.swe.env import SWEEnv`` (in rLLM configs and scripts
written before the move) goes on working; the import linter allows this one upward import.
"""

from __future__ import annotations

from sandbox_runtime.integrations.rllm.env import SWEEnv
from sandbox_runtime.swe.agents.r2e_protocol import parse_action

__all__ = ["SWEEnv", "parse_action"]
