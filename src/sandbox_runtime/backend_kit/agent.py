"""The in-sandbox agent and envd's protocol, for backends whose sandboxes can run it.

The agent is this library's envd server: a small Python process started in the sandbox by
the container's own command, reached at the sandbox's address with a per-sandbox token.
Commands and whole-file calls then take about a millisecond instead of an engine's exec.
A backend uses it by making its container command :func:`launch_command` (with a new
:func:`agent_directory` per sandbox), putting :func:`agent_archive` (the same directory) into
the sandbox after start through an :class:`AgentLink`, and mixing
:class:`AgentRouting` in before :class:`~sandbox_runtime.backend_kit.Backend` (its own
primitives renamed ``_native_*``); a backend that can start :func:`restart_command`
detached also lets a lost agent come back.  A service that speaks envd itself (AGS, e2b) is driven
with :class:`EnvdClient` and :class:`EnvdCommands` directly, and its control plane with
:class:`E2bApi` (which checkpoint routes a service has: :func:`discover`).  Needs ``httpx``.
"""

from sandbox_runtime._envd.agent import (
    AgentLink,
    AgentMode,
    AgentRouting,
    agent_archive,
    agent_can_run,
    agent_directory,
    agent_state_command,
    fallback_directory,
    launch_command,
    restart_command,
)
from sandbox_runtime._envd.client import (
    ENVD_PORT,
    EnvdClient,
    EnvdError,
    EnvdUnauthorized,
    shared_tls_context,
)
from sandbox_runtime._envd.commands import EnvdCommands
from sandbox_runtime._envd.data_plane import EnvdDataPlane
from sandbox_runtime._envd.e2b_control import E2bApi, E2bApiError, ForkCopy, SandboxGrant
from sandbox_runtime._envd.e2b_features import ServiceFeatures, discover, forget_discoveries
from sandbox_runtime._envd.e2b_snapshots import SnapshotBook

__all__ = [
    "ENVD_PORT",
    "AgentLink",
    "AgentMode",
    "AgentRouting",
    "E2bApi",
    "E2bApiError",
    "EnvdClient",
    "EnvdCommands",
    "EnvdDataPlane",
    "EnvdError",
    "EnvdUnauthorized",
    "ForkCopy",
    "SandboxGrant",
    "ServiceFeatures",
    "SnapshotBook",
    "agent_archive",
    "agent_can_run",
    "agent_directory",
    "agent_state_command",
    "discover",
    "fallback_directory",
    "forget_discoveries",
    "launch_command",
    "restart_command",
    "shared_tls_context",
]
