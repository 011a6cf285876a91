"""``sandbox-runtime-emulator``: the emulators' own command, ``ags`` or ``kubernetes``.

The same commands are ``sandbox-runtime ags emulator`` and ``sandbox-runtime kubernetes
emulator`` once this distribution is installed; this entry runs them under the library's
error handling (one line on stderr, exit 2 for what the user can fix).
"""

from __future__ import annotations

from collections.abc import Sequence

from sandbox_runtime.cli import new_parser, run
from sandbox_runtime_emulators.ags._cli import register as register_ags
from sandbox_runtime_emulators.kubernetes._cli import register as register_kubernetes

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``sandbox-runtime-emulator``; returns the process exit code."""
    parser = new_parser(
        "sandbox-runtime-emulator",
        "Local emulators of the AGS and Kubernetes APIs, for testing without the real services.",
    )
    commands = parser.add_subparsers(dest="command", metavar="EMULATOR")
    register_ags(commands, "ags")
    register_kubernetes(commands, "kubernetes")
    return run(parser, argv)
