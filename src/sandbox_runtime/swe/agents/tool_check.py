"""Whether the tools the library puts in a sandbox can run there, and what to change if not.

A tool written into a sandbox through the file API is only useful if the sandbox's
commands find it at the same path.  On most backends they do; on ``local`` with
``isolation="none"`` commands run on the host's filesystem, so a script written at the
sandbox's ``/usr/local/bin`` is ``command not found`` and every call of it would come back as
an observation, ending in a reward of 0 for a correct agent.  These checks turn that into a
:class:`~sandbox_runtime.ToolUnavailableError` at start, with the change to make, and let a
step tell a tool that vanished (exit 127 and not found) from a command's own exit 127.

Every place that installs tools calls :func:`require_tools` after installing them (the
R2E-Gym tool scripts of :class:`~sandbox_runtime.integrations.rllm.SWEEnv` and of
:class:`~sandbox_runtime.integrations.r2egym.R2EGymRuntime`); code whose tools read absolute
sandbox paths calls :func:`require_sandbox_paths` first, and a tool set with a shell (this
library's :class:`~sandbox_runtime.swe.agents.ToolBox`) calls
:func:`require_commands_see_sandbox_paths` when it is made.
"""

from __future__ import annotations

import contextlib
import shlex
import uuid
from collections.abc import Iterable

from sandbox_runtime._core.backend import Capability
from sandbox_runtime._core.runtime import SandboxRuntime
from sandbox_runtime.errors import SandboxError, ToolUnavailableError

__all__ = [
    "NOT_FOUND_EXIT_CODES",
    "commands_see_sandbox_paths",
    "missing_tools",
    "require_commands_see_sandbox_paths",
    "require_sandbox_paths",
    "require_tools",
]

#: The exit codes a shell gives a program it could not run: not executable, not found.
NOT_FOUND_EXIT_CODES = (126, 127)

# For each name: "NAME\tREASON" when it cannot run; nothing when it can.  A script's
# interpreter (its #! line) must be executable too, or every call fails "bad interpreter".
_CHECK = r"""for t in {names}; do
  p=$(command -v "$t") || {{ printf '%s\tnot found on PATH\n' "$t"; continue; }}
  case $p in /*) ;; *) continue ;; esac
  [ -x "$p" ] || {{ printf '%s\t%s is not executable\n' "$t" "$p"; continue; }}
  IFS= read -r first < "$p" || first=
  case $first in '#!'*)
    i=${{first#??}}; i=${{i# }}; i=${{i%% *}}
    [ -x "$i" ] || printf '%s\tits interpreter %s is missing\n' "$t" "$i" ;;
  esac
done"""


def missing_tools(
    sandbox: SandboxRuntime, names: Iterable[str], *, prelude: str = ""
) -> dict[str, str]:
    """The tools among ``names`` that the sandbox's commands cannot run, with the reason.

    ``prelude`` is the shell text the tools' calls start with (a ``PATH`` setting), so the
    check looks where the calls will look.  One command, whatever the number of names.
    """
    wanted = [name for name in dict.fromkeys(names) if name]
    if not wanted:
        return {}
    script = _CHECK.format(names=" ".join(shlex.quote(name) for name in wanted))
    result = sandbox.exec(f"{prelude}\n{script}" if prelude else script, timeout=60)
    missing: dict[str, str] = {}
    for line in result.stdout.splitlines():
        name, _, reason = line.partition("\t")
        if name in wanted:
            missing[name] = reason
    return missing


def commands_see_sandbox_paths(sandbox: SandboxRuntime) -> bool:
    """Whether an absolute path in a command names the same file as in the file API.

    True on container backends and on ``local`` with ``isolation="namespace"``; False on
    ``local`` with ``isolation="none"``, whose commands see the host's ``/``.
    """
    probe = f"/tmp/.sandbox-runtime-path-probe-{uuid.uuid4().hex}"
    sandbox.write_text(probe, "")
    try:
        return sandbox.exec(f"test -e {probe}", timeout=60).ok
    finally:
        with contextlib.suppress(SandboxError):
            sandbox.remove(probe)


def _remedy(sandbox: SandboxRuntime) -> str:
    backend = sandbox.config.backend
    if backend == "local":
        return (
            "the local backend with isolation=none runs commands on the host's paths, where "
            "tools and files written into the sandbox are not; use the backend option "
            "isolation=namespace (--backend-option isolation=namespace; it needs bubblewrap: "
            "apt-get install bubblewrap), or a container backend such as docker"
        )
    return f"commands on the {backend!r} backend do not see the sandbox's files at their paths"


def require_sandbox_paths(sandbox: SandboxRuntime, what: str) -> None:
    """Raise :class:`~sandbox_runtime.ToolUnavailableError` unless commands see sandbox paths.

    ``what`` names the tools that need it, for the message: ``"R2E-Gym's tools"``.
    """
    if not commands_see_sandbox_paths(sandbox):
        raise ToolUnavailableError(f"{what} cannot run in this sandbox: {_remedy(sandbox)}")


def require_commands_see_sandbox_paths(sandbox: SandboxRuntime, what: str) -> None:
    """:func:`require_sandbox_paths`, probed only where the backend shares the host's files.

    For tool sets with a shell (this library's ``bash``): the model is told its repository is
    at ``/testbed``, so a sandbox whose commands see the host's ``/`` there (``local`` with
    ``isolation="none"``) must refuse to start, not grade a correct agent 0.  Backends that
    do not share the host's file system need no probe (on ``local`` it is one write and one
    command, once per tool set).
    """
    backend = sandbox.backend
    if Capability.SHARED_HOST_FILESYSTEM in backend.capabilities_for(backend.options):
        require_sandbox_paths(sandbox, what)


def require_tools(sandbox: SandboxRuntime, names: Iterable[str], *, prelude: str = "") -> None:
    """Raise :class:`~sandbox_runtime.ToolUnavailableError` unless every tool can run.

    Call it after installing tools (a failed start, never an observation), and after a
    call of an installed tool exited with one of :data:`NOT_FOUND_EXIT_CODES` (a tool that
    vanished is an infrastructure fault; a command's own exit 127 passes).
    """
    missing = missing_tools(sandbox, names, prelude=prelude)
    if not missing:
        return
    listed = "; ".join(f"{name}: {reason}" for name, reason in missing.items())
    hint = "" if commands_see_sandbox_paths(sandbox) else f" ({_remedy(sandbox)})"
    raise ToolUnavailableError(
        f"tools installed into sandbox {sandbox.id} cannot run there: {listed}{hint}"
    )
