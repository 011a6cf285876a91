"""Subcommand ``view``: a run's report as a page (``--html``) or served on loopback (``--serve``).

``sandbox-runtime view report.json --html report.html`` writes one self-contained page
(no server, no network); ``view a.json b.json`` compares two runs; ``--serve`` serves the page
on 127.0.0.1 for runs too large for one file.  See :mod:`sandbox_runtime.swe.view`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from sandbox_runtime.errors import ConfigError

__all__ = ["register"]

_EPILOG = """\
examples: sandbox-runtime view report.json --html report.html
          sandbox-runtime view before.json after.json --html compare.html
          sandbox-runtime view report.json --serve --port 8765
The trajectories are found beside the report (REPORT.jsonl or trajectories.jsonl) unless
--trajectories names them.
"""


def register(subparsers: Any) -> None:
    """Add ``view`` to the top-level parser."""
    view = subparsers.add_parser(
        "view",
        help="a run's report as a page: rewards, errors, flags, transcripts, timelines",
        description="Show a run's report (and trajectories) as an HTML page.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    view.add_argument(
        "reports", nargs="+", type=Path, metavar="REPORT", help="one, or two to compare"
    )
    view.add_argument(
        "--trajectories",
        action="append",
        type=Path,
        metavar="FILE",
        help="the run's trajectories (JSONL); repeat per report, in the same order",
    )
    view.add_argument("--replay", type=Path, metavar="FILE", help="a 'replay --report' file")
    view.add_argument(
        "--training",
        type=Path,
        metavar="FILE",
        help="per-step figures of a training run (benchmarks/bench_training.py --json)",
    )
    view.add_argument("--html", type=Path, metavar="OUT", help="write the page here")
    view.add_argument("--serve", action="store_true", help="serve the page (for large runs)")
    view.add_argument("--host", default="127.0.0.1", help="address to serve on (default 127.0.0.1)")
    view.add_argument("--port", type=int, default=8765, help="port to serve on (0: any free one)")
    view.set_defaults(handler=_view, subparser=view)


def _view(args: argparse.Namespace) -> int:
    from sandbox_runtime.swe.view import page_data, write_page

    if len(args.reports) > 2:
        raise ConfigError("view takes one report, or two to compare")
    if not args.html and not args.serve:
        raise ConfigError("say where the page goes: --html OUT, or --serve")
    trajectories = args.trajectories or []
    if len(trajectories) > len(args.reports):
        raise ConfigError("more --trajectories than reports")
    data = page_data(
        args.reports,
        trajectories=[*trajectories, *[None] * (len(args.reports) - len(trajectories))],
        replay=args.replay,
        training=args.training,
    )
    if args.html:
        write_page(data, args.html)
        print(f"wrote {args.html} ({len(data['runs'][-1]['tasks'])} tasks)")
    if args.serve:
        _serve(data, args.host, args.port)
    return 0


def _serve(data: dict[str, Any], host: str, port: int) -> None:
    from sandbox_runtime.swe.view._serve import make_server

    try:
        server = make_server(data, host, port)
    except OSError as exc:
        raise ConfigError(
            f"cannot serve on {host}:{port}: {exc.strerror or exc} (try --port)"
        ) from exc
    address, bound = server.server_address[:2]
    print(f"serving http://{address!s}:{bound}/ (Ctrl-C stops)", flush=True)
    if host not in ("127.0.0.1", "localhost", "::1"):
        print(f"warning: {host} is reachable from other machines", file=sys.stderr)
    try:
        server.serve_forever()
    finally:
        server.server_close()
