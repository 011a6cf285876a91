"""``sandbox-runtime redteam``: run the reward-hack corpus against a backend, print the matrix.

Exit code 1 when any hack earns a reward under strict grading (a cell ``REWARD``); with
``--strict-flags``, also when a cell is unflagged or ends without a verdict.  See
docs/reliability.md for the corpus and the matrix's legend.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sandbox_runtime.cli._args import positive_int

if TYPE_CHECKING:
    from sandbox_runtime.swe.redteam.corpus import Cell

__all__ = ["register"]

EXIT_REWARDED = 1


def _csv(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def register(subparsers: Any) -> None:
    """Add ``redteam`` to the top-level parser."""
    redteam = subparsers.add_parser(
        "redteam",
        help="run the reward-hack corpus through every entry point and print the matrix",
        description=(
            "Each hack of the shipped corpus (no fix in any) is played as a scripted agent, or "
            "sent as a model response, through run (strict and benchmark grading), SWEEnv, "
            "rLLM's evaluator and verl's compute_score, on a bundled sample. Exit code 1 "
            "when any hack earns a reward under strict grading."
        ),
    )
    redteam.add_argument(
        "--backend",
        type=_csv,
        default=["docker"],
        help="comma-separated: docker, local-namespace, local-none (default: docker)",
    )
    redteam.add_argument("--entry", type=_csv, help="comma-separated entry points (default: all)")
    redteam.add_argument("--hack", type=_csv, help="comma-separated hack ids (default: all)")
    redteam.add_argument("--class", dest="klass", type=_csv, help="comma-separated classes")
    redteam.add_argument("--sample", default="csvline", help="bundled sample (default: csvline)")
    redteam.add_argument(
        "--shape", type=_csv, default=["swebench", "r2e"], help="task shapes: swebench, r2e"
    )
    redteam.add_argument("-j", "--jobs", type=positive_int, default=2, help="cells at once")
    redteam.add_argument("--base-image", help="base image of the bundled samples' Docker images")
    redteam.add_argument("--json", type=Path, help="write every cell as JSON here")
    redteam.add_argument("--markdown", type=Path, help="write the matrix as Markdown here")
    redteam.add_argument("--list", action="store_true", help="list the corpus and exit")
    redteam.add_argument(
        "--render",
        type=Path,
        nargs="+",
        metavar="CELLS.json",
        help="run nothing: print (and --markdown) the matrix of cells recorded by --json",
    )
    redteam.add_argument(
        "--strict-flags",
        action="store_true",
        help="exit 1 on unflagged cells and cells without a verdict too",
    )
    redteam.set_defaults(handler=_redteam)


def _redteam(args: argparse.Namespace) -> int:
    from sandbox_runtime.errors import ConfigError
    from sandbox_runtime.integrations.redteam import ALL_ENTRIES
    from sandbox_runtime.swe.redteam.corpus import BACKENDS, bundled_tasks, run_cells
    from sandbox_runtime.swe.redteam.hacks import HACKS
    from sandbox_runtime.swe.redteam.matrix import cells_from_json

    if args.list:
        for hack in HACKS:
            print(f"{hack.id:24} {hack.klass.value:20} {hack.expects.value:9} {hack.description}")
        return 0
    if args.render:
        cells = cells_from_json(args.render)
        return _report(args, cells)
    unknown = [b for b in args.backend if b not in BACKENDS]
    if unknown:
        raise ConfigError(f"--backend: unknown {', '.join(unknown)} (known: {', '.join(BACKENDS)})")
    entries = {n: e for n, e in ALL_ENTRIES.items() if args.entry is None or n in args.entry}
    if args.entry and len(entries) != len(args.entry):
        raise ConfigError(f"--entry: known entry points are {', '.join(ALL_ENTRIES)}")
    hacks = [h for h in HACKS if (args.hack is None or h.id in args.hack)]
    hacks = [h for h in hacks if args.klass is None or h.klass.value in args.klass]
    if not hacks:
        raise ConfigError("no hack of the corpus matches --hack / --class (see --list)")
    try:
        tasks = bundled_tasks(args.sample, args.shape)
    except KeyError as exc:
        raise ConfigError(str(exc.args[0])) from exc
    if "docker" in args.backend:
        from sandbox_runtime.swe.images import build_sample_image

        build_sample_image(args.sample, base=args.base_image)

    lock = threading.Lock()

    def progress(cell: Any) -> None:  # one JSON line per cell, so a cut-short run still tells
        if not cell.skipped:
            with lock:
                sys.stderr.write(json.dumps(cell.to_dict()) + "\n")
                sys.stderr.flush()

    backends = [BACKENDS[b] for b in args.backend]
    cells = run_cells(hacks, tasks, entries, backends, jobs=args.jobs, progress=progress)
    return _report(args, cells)


def _report(args: argparse.Namespace, cells: list[Cell]) -> int:
    """Print the matrix (one table per backend), write it, and choose the exit code."""
    from sandbox_runtime.swe.redteam.matrix import failures, markdown, summary_lines

    backends = list(dict.fromkeys(c.backend for c in cells))
    table = "\n".join(
        f"**{b}**\n\n" + markdown([c for c in cells if c.backend == b]) for b in backends
    )
    print(table)
    print("\n".join(summary_lines(cells)))
    if args.json:
        args.json.write_text(json.dumps([c.to_dict() for c in cells], indent=1) + "\n")
    if args.markdown:
        args.markdown.write_text(table)
    bad = failures(cells)
    rewarded = [c for c in bad if c.verdict == "REWARD"]
    return EXIT_REWARDED if rewarded or (args.strict_flags and bad) else 0
