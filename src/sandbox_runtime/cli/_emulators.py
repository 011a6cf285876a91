"""The ``emulator`` commands, found in the ``sandbox-runtime-emulators`` distribution.

The emulators (a Kubernetes API server, the AGS Cloud API, E2B API and envd) are test
doubles, a product of their own that users install when they test offline, as moto is beside
boto3; the library's wheel holds none of their code.  That distribution declares each
emulator's command in the ``sandbox_runtime.emulators`` entry-point group (``ags``,
``kubernetes``: a ``register(commands)`` function), and the library's ``ags`` and
``kubernetes`` groups add it here.  Without it, ``emulator`` still parses whatever follows and
says in one line what to install, with exit code 2.
"""

from __future__ import annotations

import argparse
import functools
from importlib.metadata import EntryPoint, entry_points
from typing import Any

from sandbox_runtime.errors import ConfigError

__all__ = ["ENTRY_POINT_GROUP", "INSTALL_HINT", "add_emulator_command"]

ENTRY_POINT_GROUP = "sandbox_runtime.emulators"
INSTALL_HINT = (
    "pip install ./emulators from a sandbox-runtime checkout "
    "(the sandbox-runtime-emulators distribution)"
)
_TITLES = {"ags": "AGS", "kubernetes": "Kubernetes"}


def add_emulator_command(commands: Any, service: str) -> None:
    """Add ``emulator`` for ``service`` to a group's subcommands, or a hint when it is absent."""
    entry_point = _installed().get(service)
    if entry_point is not None:
        entry_point.load()(commands)
        return
    title = _TITLES.get(service, service)
    placeholder = commands.add_parser(
        "emulator",
        help=f"run the local {title} emulator (not installed: {INSTALL_HINT})",
        add_help=False,
    )
    placeholder.add_argument("arguments", nargs=argparse.REMAINDER)
    placeholder.set_defaults(handler=_missing(title), accepts_any_arguments=True)


@functools.cache
def _installed() -> dict[str, EntryPoint]:
    """The emulators' commands by service: one scan of the installed metadata per process."""
    return {entry_point.name: entry_point for entry_point in entry_points(group=ENTRY_POINT_GROUP)}


def _missing(title: str) -> Any:
    def handler(_args: argparse.Namespace) -> int:
        raise ConfigError(f"the {title} emulator is not installed: {INSTALL_HINT}")

    return handler
