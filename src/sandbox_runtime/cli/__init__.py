"""The ``sandbox-runtime`` command line.

Each feature area registers its own subcommands from its own module (``register(subparsers)``),
so this file only assembles them and runs them under the one error handler every subcommand
shares (:func:`_failure`): a one-line ``sandbox-runtime: ...`` message, exit code 2 for what
the user can fix (bad flags, files, names, values) and 1 for what failed while running
(a backend, a sandbox), tracebacks only with ``--debug``.  argparse keeps the core free of
CLI dependencies.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import signal
import sys
import threading
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

from pydantic import ValidationError

from sandbox_runtime import __version__, close_everything
from sandbox_runtime.errors import BackendNotFoundError, ConfigError, SandboxError

__all__ = [
    "EXIT_FAILURE",
    "EXIT_INTERRUPTED",
    "EXIT_USAGE",
    "build_parser",
    "main",
    "new_parser",
    "run",
]

#: Something failed while running (a backend, a sandbox, a task that errored).
EXIT_FAILURE = 1
#: The user can fix it: a flag, a file, a name, a value.
EXIT_USAGE = 2
#: Interrupted (Ctrl-C or SIGTERM); every sandbox of the run was closed.
EXIT_INTERRUPTED = 130

#: Modules that add subcommands, in help order.  Each has ``register(subparsers) -> None``;
#: a module whose optional dependencies are missing is skipped, not fatal.
_COMMAND_MODULES = (
    "sandbox_runtime.cli.core",
    "sandbox_runtime.cli.swe",
    "sandbox_runtime.cli.replay",
    "sandbox_runtime.cli.view",
    "sandbox_runtime.cli.redteam",
    "sandbox_runtime.cli.ags",
    "sandbox_runtime.cli.kubernetes",
)


class _Parser(argparse.ArgumentParser):
    """argparse, with usage errors as one line like every other error (exit code 2)."""

    def error(self, message: str) -> NoReturn:
        program = self.prog.split()[0]
        self.exit(EXIT_USAGE, f"{program}: {message} (see '{self.prog} --help')\n")


def new_parser(prog: str, description: str) -> argparse.ArgumentParser:
    """A parser with the flags every command line of this project has (used by the emulators')."""
    parser = _Parser(prog=prog, description=description)
    parser.add_argument("--version", action="version", version=f"{prog} {__version__}")
    parser.add_argument(
        "-v", "--verbose", action="count", default=0, help="more logging (-vv: debug)"
    )
    parser.add_argument(
        "--debug", action="store_true", help="show the traceback of an error (and debug logs)"
    )
    return parser


def build_parser() -> argparse.ArgumentParser:
    """The full parser, with every available subcommand registered."""
    parser = new_parser(
        "sandbox-runtime", "One interface to isolated Linux sandboxes, whatever runs them."
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


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _failure(exc: BaseException) -> tuple[int, str]:
    """The exit code and the one-line message for an error that ended a command."""
    if isinstance(exc, ValidationError):
        problems = "; ".join(
            f"{'.'.join(map(str, error['loc'])) or 'value'}: {error['msg']}"
            for error in exc.errors()
        )
        return EXIT_USAGE, f"invalid {exc.title}: {problems}"
    if isinstance(exc, (ConfigError, BackendNotFoundError)):
        return EXIT_USAGE, str(exc)
    if isinstance(exc, SandboxError):
        return EXIT_FAILURE, str(exc)
    if isinstance(exc, (FileNotFoundError, PermissionError, IsADirectoryError, NotADirectoryError)):
        where = f": {exc.filename}" if exc.filename else ""
        return EXIT_USAGE, f"{exc.strerror or exc}{where}"
    if isinstance(exc, ImportError):
        return EXIT_USAGE, str(exc)
    return EXIT_FAILURE, f"internal error: {type(exc).__name__}: {exc} (--debug shows where)"


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the process exit code."""
    return run(build_parser(), argv)


def run(parser: argparse.ArgumentParser, argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` and run the chosen handler under the one error handler."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    args, unknown = parser.parse_known_args(arguments)
    if unknown and not getattr(args, "accepts_any_arguments", False):
        parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    level = logging.DEBUG if args.debug else logging.WARNING - 10 * min(args.verbose, 2)
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    handler = getattr(args, "handler", None)
    if handler is None:
        parser.print_help()
        return EXIT_USAGE
    previous = _stop_signals_as_ctrl_c()
    try:
        config = getattr(args, "config", None)
        if config is not None:
            from sandbox_runtime.cli._config import apply_config

            apply_config(args.subparser, Path(config))
            args = parser.parse_args(arguments)
        return int(handler(args))
    except KeyboardInterrupt:
        # The unwinding closed what the main thread held; this closes what worker threads
        # still hold (a sandbox mid-command, a checkpoint), so nothing is left for `reap`.
        closed = close_everything()
        more = f" (closed {closed} more sandboxes and checkpoint holders)" if closed else ""
        print(f"{parser.prog}: interrupted{more}", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as exc:
        if args.debug:
            traceback.print_exc()
        code, message = _failure(exc)
        print(f"{parser.prog}: {_one_line(message)}", file=sys.stderr)
        return code
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)


def _close_then_interrupt(signum: int, frame: object) -> None:
    """Close this process's sandboxes first, then unwind as Ctrl-C does.

    Closing first makes workers busy in a sandbox fail at once instead of finishing their
    command, which a thread pool's exit would otherwise wait for; and no sandbox starts
    after it (``_core/shutdown.py``).  The wait is short: a sandbox this (main) thread was
    starting stays locked until the unwinding, after which ``run`` closes the rest.
    """
    close_everything(timeout=20.0)
    raise KeyboardInterrupt


def _stop_signals_as_ctrl_c() -> dict[int, Any]:
    """SIGTERM (how schedulers and ``timeout`` stop a job) and SIGINT: close, then unwind.

    Returns the previous handlers, to restore; none off the main thread (a test calling
    ``main`` from a worker), where Python allows no handler.
    """
    if threading.current_thread() is not threading.main_thread():
        return {}
    return {
        signum: signal.signal(signum, _close_then_interrupt)
        for signum in (signal.SIGTERM, signal.SIGINT)
    }
