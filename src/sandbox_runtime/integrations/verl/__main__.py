"""Print the agent-loop file's path, for ``agent_loop_config_path=$(python -m ...)``."""

from __future__ import annotations

from sandbox_runtime.integrations.verl import AGENT_LOOP_CONFIG

print(AGENT_LOOP_CONFIG)
