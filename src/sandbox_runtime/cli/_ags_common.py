"""What every ``sandbox-runtime ags ...`` command shares: connection options and output.

Every command takes the same connection options (falling back to the environment, as the
``ags`` backend does) and prints a human-readable result or, with ``--json``, one JSON document
on stdout; errors go through the command line's one handler (one line, exit 1 or 2).  Secrets
are never printed: credentials only ever travel as ``SecretStr``, and error messages come
from the clients, which scrub them.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Sequence
from typing import Any

from sandbox_runtime.errors import ConfigError

__all__ = [
    "common_options",
    "connection",
    "emit",
    "key_values",
    "print_table",
]


def common_options() -> argparse.ArgumentParser:
    """A parent parser with the connection options and ``--json``."""
    parent = argparse.ArgumentParser(add_help=False)
    group = parent.add_argument_group("connection (default: the environment)")
    group.add_argument("--region", help="AGS region (AGS_REGION; default ap-guangzhou)")
    group.add_argument(
        "--endpoint",
        help="http(s)://host:port serving the Cloud APIs, e.g. the emulator (AGS_ENDPOINT)",
    )
    group.add_argument(
        "--internal", action="store_true", help="use the internal endpoints (inside Tencent Cloud)"
    )
    group.add_argument(
        "--secret-id",
        help="SecretId (prefer TENCENTCLOUD_SECRET_ID: arguments show in process listings)",
    )
    group.add_argument("--secret-key", help="SecretKey (prefer TENCENTCLOUD_SECRET_KEY)")
    parent.add_argument("--json", action="store_true", help="machine-readable output")
    return parent


def connection(args: argparse.Namespace) -> Any:
    """The AGS connection (``manage.settings.AgsConnection``) the arguments describe."""
    from sandbox_runtime.backends.ags.manage.settings import AgsConnection

    return AgsConnection.from_env(
        region=args.region,
        endpoint=args.endpoint,
        internal=args.internal or None,
        secret_id=args.secret_id,
        secret_key=args.secret_key,
        tcr_endpoint=getattr(args, "tcr_endpoint", None),
    )


def key_values(pairs: Sequence[str] | None, what: str) -> dict[str, str]:
    """``["k=v", ...]`` as a dict; :class:`ConfigError` for an item without ``=``."""
    result: dict[str, str] = {}
    for pair in pairs or ():
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ConfigError(f"{what} must look like KEY=VALUE, got {pair!r}")
        result[key] = value
    return result


def emit(args: argparse.Namespace, data: Any, human: Callable[[], None]) -> None:
    """Print ``data`` as JSON with ``--json``, else call ``human`` to print it for people."""
    if args.json:
        print(json.dumps(data, indent=2, sort_keys=True, default=str))
    else:
        human()


def print_table(rows: Sequence[Sequence[str]], header: Sequence[str]) -> None:
    """Columns padded to their widest cell; the last column is never padded."""
    table = [list(header), *[list(r) for r in rows]]
    widths = [max(len(r[i]) for r in table) for i in range(len(header) - 1)]
    for row in table:
        cells = [cell.ljust(width) for cell, width in zip(row, widths, strict=False)]
        print("  ".join([*cells, row[-1]]).rstrip())
