"""``sandbox-runtime ags tools ...`` and ``ags instances ...``: manage tools and instances.

Thin over the ags backend's ``manage.tools`` and ``manage.instances``; the
tool options are shared with ``ags sync`` (:func:`add_tool_options`), where they describe
every tool of a dataset.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from ._ags_common import common_options, connection, emit, key_values, print_table

__all__ = ["add_tool_options", "register", "tool_fields"]


def add_tool_options(parser: argparse.ArgumentParser, *, with_registry_type: bool = True) -> None:
    """The options that describe a tool (everything but its name and image)."""
    group = parser.add_argument_group("tool")
    if with_registry_type:
        group.add_argument(
            "--registry-type",
            choices=("enterprise", "personal", "custom", "system"),
            default="enterprise",
            help="registry of the image: enterprise = TCR (default), personal = CCR",
        )
    group.add_argument(
        "--envd",
        choices=("mount", "image"),
        default="mount",
        help="mount: envd from Tencent's envd image, mounted read-only (default); "
        "image: the image has envd",
    )
    group.add_argument("--envd-image", help="image holding envd (--envd mount)")
    group.add_argument("--envd-path", help="envd binary in the image (--envd image)")
    group.add_argument(
        "--port",
        action="append",
        type=int,
        default=[],
        help="another port the instances serve (repeat; envd's 49983 is always there)",
    )
    group.add_argument("--cpu", default="2", help="cores, or the service's 2000m (default 2)")
    group.add_argument("--memory", default="4Gi", help="memory, e.g. 4Gi (default)")
    group.add_argument("--storage", choices=("1Gi", "5Gi", "10Gi", "20Gi"), help="disk size")
    group.add_argument(
        "--role-arn", help="CAM role AGS assumes to pull images (default AGS_ROLE_ARN)"
    )
    group.add_argument("--network", choices=("PUBLIC", "VPC", "SANDBOX"), default="PUBLIC")
    group.add_argument("--subnet", action="append", default=[], help="VPC subnet id (repeat)")
    group.add_argument(
        "--security-group", action="append", default=[], help="VPC security group id (repeat)"
    )
    group.add_argument("--tag", action="append", metavar="KEY=VALUE", help="tag (repeat)")
    group.add_argument("--env", action="append", metavar="KEY=VALUE", help="variable (repeat)")
    group.add_argument("--default-timeout", default="1h", help="instance lifetime (e.g. 1h)")


def _cpu(value: str) -> str:
    """``2`` or ``0.5`` cores as the service writes them (``2000m``); ``2000m`` as is."""
    try:
        return f"{round(float(value) * 1000)}m"
    except ValueError:
        return value


def tool_fields(args: argparse.Namespace) -> dict[str, Any]:
    """The tool options as :class:`~sandbox_runtime.backends.ags.manage.tools.ToolSpec` fields."""
    envd: dict[str, Any] = {"kind": args.envd}
    if args.envd == "mount" and args.envd_image:
        envd["image"] = args.envd_image
    if args.envd == "image" and args.envd_path:
        envd["path"] = args.envd_path
    from sandbox_runtime.backends.ags.manage.tools import ENVD_PORT

    fields: dict[str, Any] = {
        "envd": envd,
        "ports": tuple(dict.fromkeys([ENVD_PORT, *args.port])),
        "cpu": _cpu(args.cpu),
        "memory": args.memory,
        "storage": args.storage,
        "role_arn": args.role_arn or os.environ.get("AGS_ROLE_ARN") or None,
        "network_mode": args.network,
        "subnet_ids": tuple(args.subnet),
        "security_group_ids": tuple(args.security_group),
        "tags": key_values(args.tag, "--tag"),
        "env": key_values(args.env, "--env"),
        "default_timeout": args.default_timeout,
    }
    if getattr(args, "registry_type", None):
        fields["image_registry_type"] = args.registry_type
    return fields


def register(commands: Any) -> None:
    """Add ``tools`` and ``instances`` to the ``ags`` group."""
    common = common_options()
    tools = commands.add_parser("tools", help="create, wait for, list, get and delete tools")
    sub = tools.add_subparsers(dest="tools_command", metavar="ACTION")
    tools.set_defaults(handler=lambda _args: (tools.print_help(), 2)[1])

    create = sub.add_parser(
        "create", parents=[common], help="create a custom tool for an image and wait until ACTIVE"
    )
    create.add_argument("name", help="tool name: 1-50 of letters, digits, _ and -")
    create.add_argument("--image", required=True, help="image the instances run")
    add_tool_options(create)
    create.add_argument("--description", default="")
    create.add_argument("--no-wait", action="store_true", help="return while still CREATING")
    create.add_argument("--wait-timeout", type=float, default=600.0, help="seconds (default 600)")
    create.set_defaults(handler=_create)

    get = sub.add_parser("get", parents=[common], help="show one tool")
    get.add_argument("tool", help="name or id (sdt-...)")
    get.set_defaults(handler=_get)

    listing = sub.add_parser("list", parents=[common], help="list tools")
    listing.add_argument("--tag", action="append", metavar="KEY=VALUE", help="only with this tag")
    listing.add_argument("--status", choices=("CREATING", "ACTIVE", "FAILED", "DELETING"))
    listing.set_defaults(handler=_list)

    wait = sub.add_parser("wait", parents=[common], help="wait until a tool is ACTIVE")
    wait.add_argument("tool", help="name or id")
    wait.add_argument("--timeout", type=float, default=600.0, help="seconds (default 600)")
    wait.set_defaults(handler=_wait)

    delete = sub.add_parser("delete", parents=[common], help="delete tools")
    delete.add_argument("tools", nargs="+", metavar="TOOL", help="names or ids")
    delete.set_defaults(handler=_delete)

    instances = commands.add_parser("instances", help="start, stop and list instances; tokens")
    isub = instances.add_subparsers(dest="instances_command", metavar="ACTION")
    instances.set_defaults(handler=lambda _args: (instances.print_help(), 2)[1])

    start = isub.add_parser("start", parents=[common], help="start an instance of a tool")
    which = start.add_mutually_exclusive_group(required=True)
    which.add_argument("--tool", help="tool name")
    which.add_argument("--tool-id", help="tool id")
    start.add_argument("--timeout", default="5m", help="lifetime, e.g. 5m (default), 1h")
    start.add_argument("--image", help="run this image instead of the tool's")
    start.add_argument(
        "--registry-type", default="enterprise", choices=("enterprise", "personal", "custom")
    )
    start.add_argument("--metadata", action="append", metavar="KEY=VALUE")
    start.add_argument("--no-wait", action="store_true", help="return while still STARTING")
    start.set_defaults(handler=_start)

    stop = isub.add_parser("stop", parents=[common], help="stop instances")
    stop.add_argument("instances", nargs="+", metavar="INSTANCE")
    stop.set_defaults(handler=_stop)

    ilist = isub.add_parser("list", parents=[common], help="list instances")
    ilist.add_argument("--tool-id")
    ilist.add_argument("--status", help="e.g. RUNNING")
    ilist.set_defaults(handler=_instances)

    token = isub.add_parser("token", parents=[common], help="acquire a data-plane token")
    token.add_argument("instance")
    token.add_argument(
        "--reveal", action="store_true", help="print the token itself (it is a credential)"
    )
    token.set_defaults(handler=_token)


# -- tools ---------------------------------------------------------------------------------


def _show_tool(info: Any) -> None:
    print(f"{info.name}  {info.tool_id}  {info.status}")
    if info.status_reason:
        print(f"  reason: {info.status_reason}")
    print(f"  image:  {info.image or '-'}")
    for key, value in sorted(info.tags.items()):
        print(f"  tag:    {key}={value}")


def _create(args: argparse.Namespace) -> int:
    from sandbox_runtime.backends.ags.manage.tools import ToolFailedError, ToolSpec, create_tool

    spec = ToolSpec(
        name=args.name, image=args.image, description=args.description, **tool_fields(args)
    )
    client = connection(args).ags_client()
    try:
        info = create_tool(client, spec, wait=not args.no_wait, timeout=args.wait_timeout)
    except ToolFailedError as exc:
        failed = exc.tool
        emit(args, failed.to_dict(), lambda: _show_tool(failed))
        raise
    emit(args, info.to_dict(), lambda: _show_tool(info))
    return 0


def _get(args: argparse.Namespace) -> int:
    from sandbox_runtime.backends.ags.manage.tools import get_tool

    info = get_tool(connection(args).ags_client(), args.tool)
    emit(args, info.to_dict(), lambda: _show_tool(info))
    return 0


def _list(args: argparse.Namespace) -> int:
    from sandbox_runtime.backends.ags.manage.tools import list_tools

    found = list_tools(
        connection(args).ags_client(), tags=key_values(args.tag, "--tag"), status=args.status
    )

    def human() -> None:
        rows = [(t.name, t.tool_id, t.status, t.image or "-") for t in found]
        print_table(rows, ("NAME", "ID", "STATUS", "IMAGE"))
        print(f"{len(found)} tool(s)")

    emit(args, [t.to_dict() for t in found], human)
    return 0


def _wait(args: argparse.Namespace) -> int:
    from sandbox_runtime.backends.ags.manage.tools import get_tool, wait_for_active

    client = connection(args).ags_client()
    info = wait_for_active(client, get_tool(client, args.tool).tool_id, timeout=args.timeout)
    emit(args, info.to_dict(), lambda: _show_tool(info))
    return 0


def _delete(args: argparse.Namespace) -> int:
    from sandbox_runtime.backends.ags.manage.tools import delete_tool

    client = connection(args).ags_client()
    deleted = [delete_tool(client, tool) for tool in args.tools]

    def human() -> None:
        for tool in deleted:
            print(f"deleted {tool.name} ({tool.tool_id})")

    emit(args, [t.to_dict() for t in deleted], human)
    return 0


# -- instances -----------------------------------------------------------------------------


def _instance_dict(info: Any) -> dict[str, Any]:
    return {
        "instance_id": info.instance_id,
        "tool_id": info.tool_id,
        "tool_name": info.tool_name,
        "status": info.status,
        "expires_at": info.expires_at,
        "stop_reason": info.stop_reason,
        "metadata": info.metadata,
    }


def _start(args: argparse.Namespace) -> int:
    from sandbox_runtime.backends.ags.manage.instances import start_instance

    info = start_instance(
        connection(args).ags_client(),
        tool_name=args.tool,
        tool_id=args.tool_id,
        timeout=args.timeout,
        image=args.image,
        image_registry_type=args.registry_type,
        metadata=key_values(args.metadata, "--metadata"),
        wait=None if args.no_wait else 300.0,
    )
    emit(
        args,
        _instance_dict(info),
        lambda: print(f"{info.instance_id}  {info.status}  expires {info.expires_at}"),
    )
    return 0


def _stop(args: argparse.Namespace) -> int:
    from sandbox_runtime.backends.ags.manage.instances import stop_instance

    client = connection(args).ags_client()
    results = [(instance, stop_instance(client, instance)) for instance in args.instances]

    def human() -> None:
        for instance, stopped in results:
            print(f"{'stopped' if stopped else 'already stopped'} {instance}")

    emit(args, [{"instance_id": i, "stopped": s} for i, s in results], human)
    return 0


def _instances(args: argparse.Namespace) -> int:
    from sandbox_runtime.backends.ags.manage.instances import list_instances

    found = list_instances(connection(args).ags_client(), tool_id=args.tool_id, status=args.status)

    def human() -> None:
        rows = [(i.instance_id, i.tool_name, i.status, i.expires_at) for i in found]
        print_table(rows, ("INSTANCE", "TOOL", "STATUS", "EXPIRES"))
        print(f"{len(found)} instance(s)")

    emit(args, [_instance_dict(i) for i in found], human)
    return 0


def _token(args: argparse.Namespace) -> int:
    from sandbox_runtime.backends.ags.manage.instances import acquire_token

    token = acquire_token(connection(args).ags_client(), args.instance)
    value = token.token.get_secret_value() if args.reveal else "**********"

    def human() -> None:
        print(value)
        if not args.reveal:
            print(f"(hidden; --reveal prints it) expires {token.expires_at}")

    emit(args, {"token": value, "expires_at": token.expires_at}, human)
    return 0
