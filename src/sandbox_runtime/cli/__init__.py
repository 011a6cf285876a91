"""The ``sandbox-runtime`` command line.

Each feature area registers its own subcommands from its own module (``register(subparsers)``),
so this file only assembles them; argparse keeps the core free of CLI dependencies.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Sequence

__all__ = ["main"]

#: Modules that add subcommands, in help order.  Each has ``register(subparsers) -> None``;
#: a module whose optional dependencies are missing is skipped, not fatal.
_COMMAND_MODULES = (
    "sandbox_runtime.cli.core",
    "sandbox_runtime.cli.swe",
    "sandbox_runtime.cli.ags",
    "sandbox_runtime.cli.kubernetes",
)


def build_parser() -> argparse.ArgumentParser:
    """The full parser, with every available subcommand registered."""
    parser = argparse.ArgumentParser(
        prog="sandbox-runtime",
        description="One interface to isolated Linux sandboxes, whatever runs them.",
    )
    parser.add_argument(
        "-v", "--verbose", action="count", default=0, help="more logging (-vv: debug)"
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module_name in _COMMAND_MODULES:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name is not None and module_name.startswith(exc.name):
                continue  # that feature area is not part of this installation
            raise
        module.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the process exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    level = logging.WARNING - 10 * min(args.verbose, 2)
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    handler = getattr(args, "handler", None)
    if handler is None:
        parser.print_help()
        return 2
    try:
        return int(handler(args))
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
