"""``sandbox-runtime kubernetes ...``: the Kubernetes backend's tools.

Its one command, ``emulator``, comes from the separate ``sandbox-runtime-emulators``
distribution when that is installed (:mod:`sandbox_runtime.cli._emulators`).
"""

from __future__ import annotations

import argparse
from typing import Any

from sandbox_runtime.cli._emulators import add_emulator_command

__all__ = ["register"]


def register(subparsers: Any) -> None:
    """Add the ``kubernetes`` command group."""
    group = subparsers.add_parser("kubernetes", help="Kubernetes backend tools")
    commands = group.add_subparsers(dest="kubernetes_command", metavar="COMMAND")
    group.set_defaults(handler=lambda _args: _help(group))
    add_emulator_command(commands, "kubernetes")


def _help(parser: argparse.ArgumentParser) -> int:
    parser.print_help()
    return 2
