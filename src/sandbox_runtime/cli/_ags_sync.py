"""``sandbox-runtime ags sync`` and ``ags push``: a dataset's images as tools, and in a registry.

``sync`` reads the images of one or more task sources (the same sources ``sandbox-runtime
run`` reads), optionally pushes them to TCR/CCR, makes sure each has an ACTIVE tool, and
writes the image->tool mapping that ``--backend ags`` with ``tool_mapping`` reads.  ``push``
does only the registry part.  Both take ``--dry-run``, which prints the plan after read-only
calls (the tool listing, the TCR instance's domain) and changes nothing.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from sandbox_runtime.errors import ConfigError

from ._ags_common import common_options, connection, emit, print_table
from ._ags_tools import add_tool_options, tool_fields
from ._tasks import SOURCES_HELP

__all__ = ["register"]

_SOURCES = SOURCES_HELP


def _add_dataset_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("images")
    group.add_argument(
        "--dataset", action="append", default=[], metavar="SOURCE", help=f"task source: {_SOURCES}"
    )
    group.add_argument("--split", default="train", help="split of a Hugging Face dataset")
    group.add_argument("--format", metavar="NAME", help="task format (default: detected per row)")


def _add_registry_options(parser: argparse.ArgumentParser, flag: str, required: bool) -> None:
    group = parser.add_argument_group("registry")
    group.add_argument(
        flag,
        dest="registry",
        required=required,
        metavar="TARGET",
        help="tcr:<registry-id> (TCR Enterprise), ccr or ccr:<domain> (CCR Personal), "
        "or host[:port] of any registry",
    )
    group.add_argument("--namespace", help="namespace in the registry (default: the image's own)")
    group.add_argument(
        "--registry-username",
        help="docker login user for CCR or a custom registry; the password is read from "
        "TCR_PASSWORD (TCR logs in with a temporary token by itself)",
    )
    group.add_argument("--tcr-endpoint", help="TCR Cloud API endpoint (TCR_ENDPOINT)")
    group.add_argument("--no-pull", action="store_true", help="fail on images not present locally")
    group.add_argument(
        "--force-push", action="store_true", help="push even what the registry already has"
    )


def register(commands: Any) -> None:
    """Add ``sync`` and ``push`` to the ``ags`` group."""
    common = common_options()
    sync = commands.add_parser(
        "sync",
        parents=[common],
        help="make an ACTIVE tool for every image of a dataset and write the mapping",
        description=(
            "Create the missing tools for a dataset's images (found by their image tag in one "
            "listing, so re-running only creates what is missing), wait until they are "
            "ACTIVE, and write the image->tool mapping for --backend ags (tool_mapping)."
        ),
    )
    _add_dataset_options(sync)
    sync.add_argument("--image", action="append", default=[], help="an image (repeat)")
    sync.add_argument("--out", type=Path, help="where to write the mapping JSON")
    sync.add_argument("-j", "--jobs", type=int, default=4, help="pushes/creations at once")
    sync.add_argument("--dry-run", action="store_true", help="print the plan, change nothing")
    sync.add_argument(
        "--retry-failed", action="store_true", help="delete FAILED tools and create them anew"
    )
    sync.add_argument("--wait-timeout", type=float, default=1800.0, help="seconds for ACTIVE")
    sync.add_argument("--poll-interval", type=float, default=2.0, help="seconds between polls")
    add_tool_options(sync)
    _add_registry_options(sync, "--push-registry", required=False)
    sync.set_defaults(handler=_sync)

    push = commands.add_parser(
        "push",
        parents=[common],
        help="copy images to TCR, CCR or another registry (pull, tag, push)",
        description=(
            "Pull (if missing), tag and push images through the local Docker engine; TCR and "
            "CCR namespaces and repositories are created first when missing."
        ),
    )
    push.add_argument("images", nargs="*", metavar="IMAGE")
    _add_dataset_options(push)
    _add_registry_options(push, "--registry", required=True)
    push.add_argument("--dry-run", action="store_true", help="print the plan, change nothing")
    push.set_defaults(handler=_push)


def _images(args: argparse.Namespace, extra: list[str]) -> list[str]:
    from sandbox_runtime.cli._tasks import load_tasks

    images = list(extra)
    loaded = load_tasks(list(args.dataset), args.format, args.split)
    for problem in loaded.problems:
        print(f"skipped {problem}", file=sys.stderr)
    images += [task.image for task in loaded.tasks if task.image]
    images = list(dict.fromkeys(images))
    if not images:
        raise ConfigError("no image: give --dataset SOURCE or images")
    return images


def _pusher(args: argparse.Namespace) -> Any:
    from pydantic import SecretStr

    from sandbox_runtime.backends.ags.manage.registry import RegistryPusher, RegistryTarget

    target = RegistryTarget.parse(args.registry, namespace=args.namespace)
    settings = connection(args)
    password = os.environ.get("TCR_PASSWORD")
    return RegistryPusher(
        target,
        tcr=settings.tcr_client() if target.kind in ("tcr", "ccr") else None,
        username=args.registry_username,
        password=SecretStr(password) if password else None,
        internal=settings.internal,
        pull=not args.no_pull,
        force=args.force_push,
    )


def _sync(args: argparse.Namespace) -> int:
    from sandbox_runtime.backends.ags.manage.sync import ToolSync, ToolTemplate

    if args.out is None and not args.dry_run:
        raise ConfigError("sync: give --out FILE for the mapping (or --dry-run)")
    images = _images(args, args.image)
    template = ToolTemplate(**tool_fields(args))
    pusher = _pusher(args) if args.registry else None
    quiet = args.json
    sync = ToolSync(
        connection(args).ags_client(),
        template,
        jobs=args.jobs,
        pusher=pusher,
        dry_run=args.dry_run,
        retry_failed=args.retry_failed,
        wait_timeout=args.wait_timeout,
        poll_interval=args.poll_interval,
        log=None if quiet else lambda line: print(line, file=sys.stderr),
    )
    report = sync.run(images, args.out)
    emit(args, report.to_dict(), lambda: _print_sync(report))
    return 0 if report.ok else 1


def _print_sync(report: Any) -> None:
    if report.dry_run:
        for entry in report.entries:
            if entry.push is not None:
                print(f"would push {entry.push.item.source} -> {entry.push.item.target}")
        for entry in report.entries:
            if entry.action == "reuse":
                print(f"would reuse {entry.tool_name} ({entry.status}) for {entry.image}")
            elif entry.status == "ERROR":
                print(f"cannot create a tool for {entry.image}: {entry.reason}")
            else:
                verb = "recreate" if entry.action == "recreate" else "create"
                print(
                    f"would {verb} tool {entry.tool_name} for {entry.image} (runs {entry.target})"
                )
        print(
            f"{len(report.entries)} image(s): {report.count('reuse')} reused, "
            f"{report.count('create') + report.count('recreate')} to create (dry run)"
        )
        return
    rows = [(e.status, e.action, e.tool_name, e.tool_id or "-", e.image) for e in report.entries]
    print_table(rows, ("STATUS", "ACTION", "TOOL", "ID", "IMAGE"))
    for entry in report.entries:
        if entry.reason and entry.status != "ACTIVE":
            print(f"{entry.image}: {entry.reason}")
    data = report.to_dict()
    where = f"; mapping of {len(report.mapping)} written to {report.out}" if report.out else ""
    print(
        f"{data['images']} image(s): {data['reused']} reused, {data['created']} created, "
        f"{data['active']} ACTIVE{where}"
    )


def _push(args: argparse.Namespace) -> int:
    from sandbox_runtime.backends.ags.manage.registry import PushResult

    images = _images(args, args.images)
    pusher = _pusher(args)
    items = pusher.plan(images)
    if args.dry_run:
        results = [PushResult(item, "planned") for item in items]
    else:
        pusher.prepare(items)
        results = []
        for item in items:
            result = pusher.push(item)
            if not args.json:
                print(f"{result.status} {item.target}", file=sys.stderr)
            results.append(result)

    def human() -> None:
        for result in results:
            verb = "would push" if result.status == "planned" else result.status
            line = f"{verb} {result.item.source} -> {result.item.target}"
            print(line + (f": {result.error}" if result.error else ""))

    emit(args, [r.to_dict() for r in results], human)
    return 1 if any(r.status == "failed" for r in results) else 0
