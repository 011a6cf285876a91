"""Agents behind one small interface (:class:`Agent`), and a table to build them by name."""

from __future__ import annotations

from typing import Any

from sandbox_runtime.errors import ConfigError
from sandbox_runtime.swe.agents.base import Agent, AgentResult, Budget, Step
from sandbox_runtime.swe.agents.scripted import ScriptedAgent
from sandbox_runtime.swe.agents.simple import NullAgent, OracleAgent
from sandbox_runtime.swe.agents.tools import TOOL_SCHEMAS, Observation, ToolBox, ToolCall

__all__ = [
    "AGENT_NAMES",
    "TOOL_SCHEMAS",
    "Agent",
    "AgentResult",
    "Budget",
    "NullAgent",
    "Observation",
    "OracleAgent",
    "ScriptedAgent",
    "Step",
    "ToolBox",
    "ToolCall",
    "make_agent",
]

AGENT_NAMES = ("oracle", "null", "scripted", "llm")


def make_agent(name: str, **options: Any) -> Agent:
    """Build an agent by name; ``scripted`` takes ``script=PATH``, ``llm`` takes ``config=``.

    Unknown names raise :class:`~sandbox_runtime.ConfigError` listing the known ones.
    """
    if name == "oracle":
        return OracleAgent()
    if name == "null":
        return NullAgent()
    if name == "scripted":
        script = options.get("script")
        if script is None:
            raise ConfigError("the scripted agent needs a script (--script FILE)")
        return ScriptedAgent.from_file(script)
    if name == "llm":
        from sandbox_runtime.swe.agents.llm import LLMAgent, LLMConfig

        config = options.get("config")
        if not isinstance(config, LLMConfig):
            raise ConfigError("the llm agent needs an LLMConfig (--base-url and --model)")
        return LLMAgent(config)
    raise ConfigError(f"unknown agent {name!r}; agents: {', '.join(AGENT_NAMES)}")
