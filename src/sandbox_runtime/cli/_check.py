"""``sandbox-runtime tasks check``: gold must resolve and no patch must not, per row.

The work is :mod:`sandbox_runtime.swe.check` (and :mod:`~sandbox_runtime.swe.check_harness`
for ``--harness``); this module reads the flags and the rows, and prints the table or JSON.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from sandbox_runtime.cli._args import backend_options, positive_float, positive_int
from sandbox_runtime.cli._tasks import SOURCES_HELP, load_tasks
from sandbox_runtime.errors import ConfigError

if TYPE_CHECKING:
    from sandbox_runtime.swe.task import Task

__all__ = ["add_check"]

_DESCRIPTION = """\
Run every row twice, each in a fresh sandbox of its image: with the gold patch and with no
patch. A row is OK when gold resolves and no patch does not, and no FAIL_TO_PASS or
PASS_TO_PASS id says otherwise. Finds broken images, bad rows and grading differences before
a training run does.
"""

_EPILOG = f"""\
task sources: {SOURCES_HELP}
exit codes:   0 every row OK, 1 some row not OK or unreadable, 2 bad input
"""


def add_check(sub: Any) -> None:
    """Add ``tasks check`` to the ``tasks`` actions."""
    check = sub.add_parser(
        "check",
        help="run gold and no patch on each row and report rows that grade wrong",
        description=_DESCRIPTION,
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    check.add_argument("sources", nargs="+", metavar="TASKS", help="task sources")
    check.add_argument("--format", metavar="NAME", help="task format (default: detected)")
    check.add_argument("--split", default="train", help="split of a Hugging Face dataset")
    check.add_argument("--select", action="append", metavar="IDS", help="only these task ids")
    check.add_argument("--limit", type=positive_int, help="only the first N tasks")
    check.add_argument("--backend", default="docker", help="sandbox backend (default: docker)")
    check.add_argument(
        "--backend-option", action="append", default=[], metavar="KEY=VALUE", help="repeat"
    )
    check.add_argument(
        "--image",
        action="append",
        default=[],
        metavar="[TASK_ID=]IMAGE",
        help="run the rows in IMAGE instead of their own (TASK_ID= for one row; repeat)",
    )
    check.add_argument("--base-image", help="base image of the bundled samples' images")
    check.add_argument(
        "--test-timeout", type=positive_float, default=300.0, help="seconds for each test run"
    )
    check.add_argument("-j", "--jobs", type=positive_int, default=1, help="rows checked at once")
    check.add_argument(
        "--harness",
        action="store_true",
        help="also run the SWE-bench harness's own eval script (needs swebench 3.x/4.x) "
        "and compare its verdicts with the library's, id by id",
    )
    check.add_argument("--json", action="store_true", help="print JSON instead of the table")
    check.set_defaults(handler=_check)


def _with_images(tasks: list[Task], overrides: list[str]) -> list[Task]:
    """The tasks with ``--image`` applied (one for all rows, or ``TASK_ID=IMAGE``)."""
    every: str | None = None
    per_task: dict[str, str] = {}
    for item in overrides:
        task_id, sep, image = item.rpartition("=")
        if not sep:
            every = image
        elif task_id and image:
            per_task[task_id] = image
        else:
            raise ConfigError(f"--image {item!r}: give IMAGE or TASK_ID=IMAGE")
    known = {task.task_id for task in tasks}
    unknown = sorted(set(per_task) - known)
    if unknown:
        raise ConfigError(f"--image: no task with id {', '.join(unknown)}")
    return [
        task.model_copy(update={"image": per_task.get(task.task_id, every or task.image)})
        for task in tasks
    ]


def _check(args: argparse.Namespace) -> int:
    from sandbox_runtime.swe.check import check_tasks, table
    from sandbox_runtime.swe.check_harness import compare_with_harness, harness_problem
    from sandbox_runtime.swe.dataset import DatasetError, select_tasks
    from sandbox_runtime.swe.runner import RunOptions

    if args.harness and (problem := harness_problem()) is not None:
        raise ConfigError(f"--harness: {problem}")
    options = RunOptions(
        backend=args.backend,
        jobs=args.jobs,
        test_timeout=args.test_timeout,
        base_image=args.base_image,
        backend_options=backend_options(args.backend, args.backend_option),
    )
    try:
        loaded = load_tasks(args.sources, args.format, args.split)
    except DatasetError as exc:
        raise ConfigError(str(exc)) from exc
    ids = [i for chunk in args.select or [] for i in chunk.split(",") if i]
    tasks = select_tasks(loaded.tasks, ids=ids or None, limit=args.limit)
    tasks = _with_images(tasks, args.image)
    for problem in loaded.problems:
        print(f"bad row: {problem}", file=sys.stderr)
    checks = check_tasks(tasks, options, harness=compare_with_harness if args.harness else None)
    if args.json:
        body = {"rows": [c.to_dict() for c in checks], "bad_rows": loaded.problems}
        print(json.dumps(body, indent=2))
    else:
        print(table(checks))
    return 1 if loaded.problems or any(not c.ok for c in checks) or not checks else 0
