"""Core subcommands: ``backends``, ``reap`` and ``exec``."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from typing import Any

from sandbox_runtime import SandboxRuntime, list_backends, load_backend
from sandbox_runtime.cli._args import backend_options, positive_float
from sandbox_runtime.errors import BackendUnavailableError, ConfigError, SandboxError

__all__ = ["register"]


def register(subparsers: Any) -> None:
    """Add the core subcommands to the top-level parser."""
    backends = subparsers.add_parser(
        "backends", help="list installed backends and whether each can run here"
    )
    backends.add_argument("--json", action="store_true", help="machine-readable output")
    backends.set_defaults(handler=_backends)

    reap = subparsers.add_parser(
        "reap",
        help="remove this library's sandboxes that expired or whose owner process died",
        description=(
            "Remove sandboxes created by sandbox-runtime that are past their lifetime or whose "
            "owner process is gone. Sandboxes without this library's labels are never touched."
        ),
    )
    reap.add_argument(
        "--backend",
        action="append",
        dest="backends",
        metavar="NAME",
        help="only this backend (repeatable); default: every installed backend that can run",
    )
    reap.add_argument("--dry-run", action="store_true", help="list, do not remove")
    reap.add_argument("--json", action="store_true", help="machine-readable output")
    reap.set_defaults(handler=_reap)

    run = subparsers.add_parser(
        "exec",
        help="open a sandbox, run one command in it, and remove it",
        description="Example: sandbox-runtime exec --backend docker --image IMAGE -- python -V",
    )
    run.add_argument("--backend", default="local")
    run.add_argument("--image")
    run.add_argument("--workdir", default="/workspace")
    run.add_argument(
        "--timeout", type=positive_float, default=None, help="seconds (default: no limit)"
    )
    run.add_argument(
        "--backend-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an option of the backend (repeat; VALUE may be JSON)",
    )
    run.add_argument("argv", nargs=argparse.REMAINDER, help="the command, after --")
    run.set_defaults(handler=_exec)


def _backends(args: argparse.Namespace) -> int:
    rows: list[dict[str, Any]] = []
    for info in list_backends():
        try:
            availability = load_backend(info.name).availability()
            ok, reason = availability.ok, availability.reason
        except SandboxError as exc:
            ok, reason = False, str(exc)
        rows.append(
            {
                "name": info.name,
                "target": info.target,
                "distribution": info.distribution,
                "available": ok,
                "reason": reason,
            }
        )
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    width = max((len(row["name"]) for row in rows), default=4)
    for row in rows:
        state = "ok" if row["available"] else f"unavailable: {row['reason']}"
        print(f"{row['name']:<{width}}  {state}")
    return 0


def _reap(args: argparse.Namespace) -> int:
    names = args.backends or [info.name for info in list_backends()]
    for name in args.backends or ():
        _known_backend(name)  # a misspelt name is the user's to fix, before anything is removed
    report: list[dict[str, str]] = []
    failed = False
    for name in names:
        try:
            backend_cls = load_backend(name)
            if not args.backends and not backend_cls.availability():
                continue  # nothing of this backend can exist here
            for reaped in backend_cls.reap(dry_run=args.dry_run):
                report.append(
                    {"backend": reaped.backend, "id": reaped.sandbox_id, "reason": reaped.reason}
                )
        except SandboxError as exc:
            failed = True
            print(f"{name}: {exc}", file=sys.stderr)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        verb = "would remove" if args.dry_run else "removed"
        for row in report:
            print(f"{verb} {row['backend']} {_short_id(row['id'])} ({row['reason']})")
        print(f"{len(report)} sandbox(es) {verb}")
    return 1 if failed else 0


def _known_backend(name: str) -> None:
    """Raise ``BackendNotFoundError`` (a usage error) for a name nothing provides.

    A backend that exists but cannot load here (a missing extra) is not a usage error: the
    reap reports it with the others and exits 1.
    """
    with contextlib.suppress(BackendUnavailableError):
        load_backend(name)  # the registry caches the class for the reap itself


def _short_id(sandbox_id: str) -> str:
    """Docker's 64-hex ids shortened as ``docker ps`` does; names (pods, instances) whole."""
    is_hex = len(sandbox_id) == 64 and all(c in "0123456789abcdef" for c in sandbox_id)
    return sandbox_id[:12] if is_hex else sandbox_id


def _exec(args: argparse.Namespace) -> int:
    argv = list(args.argv)
    if argv and argv[0] == "--":
        argv = argv[1:]
    if not argv:
        raise ConfigError("exec: give the command after --")
    command: str | list[str] = argv[0] if len(argv) == 1 else argv
    options = backend_options(args.backend, args.backend_option)
    with SandboxRuntime(
        backend=args.backend,
        image=args.image,
        workdir=args.workdir,
        exec_timeout=args.timeout,
        options=options,
    ) as sandbox:
        result = sandbox.exec(command)
    sys.stdout.buffer.write(result.stdout_bytes)
    sys.stderr.buffer.write(result.stderr_bytes)
    if result.timed_out:
        print(f"sandbox-runtime: timed out after {result.duration:.1f}s", file=sys.stderr)
    return result.exit_code
