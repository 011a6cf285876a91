"""``sandbox-runtime ags ...``: commands for Tencent Cloud Agent Sandbox.

``tools`` and ``instances`` (in ``_ags_tools``) manage tools and instances by hand; ``sync``
and ``push`` (in ``_ags_sync``) turn a dataset's images into tools and an image->tool
mapping; ``emulator`` runs the local AGS emulator in the foreground when the
``sandbox-runtime-emulators`` distribution is installed (:mod:`sandbox_runtime.cli._emulators`).
Heavy imports
happen inside the handlers, so listing commands stays fast and works without the ``ags``
extras.
"""

from __future__ import annotations

import argparse
from typing import Any

from sandbox_runtime.cli._emulators import add_emulator_command

__all__ = ["register"]


def register(subparsers: Any) -> None:
    """Add the ``ags`` command group."""
    ags = subparsers.add_parser("ags", help="Tencent Cloud Agent Sandbox (AGS) tools")
    commands = ags.add_subparsers(dest="ags_command", metavar="COMMAND")
    ags.set_defaults(handler=lambda _args: _help(ags))

    from . import _ags_sync, _ags_tools

    _ags_tools.register(commands)
    _ags_sync.register(commands)

    add_emulator_command(commands, "ags")


def _help(parser: argparse.ArgumentParser) -> int:
    parser.print_help()
    return 2
