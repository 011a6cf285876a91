"""``sandbox-runtime ags emulator``: the AGS emulator in the foreground.

Registered under the library's ``ags`` command through the ``sandbox_runtime.emulators``
entry point, and under ``sandbox-runtime-emulator ags``.  The emulator itself (httpx, the
envd routes) is imported in the handler, so listing commands stays fast.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
from typing import Any

from sandbox_runtime.errors import ConfigError
from sandbox_runtime_emulators._cli_args import add_fault_arguments, add_limit_arguments, quotas

__all__ = ["register"]


def register(commands: Any, name: str = "emulator") -> None:
    """Add the emulator's command, as ``name``, to a group's subcommands."""
    emulator = commands.add_parser(
        name,
        help="run the local AGS emulator (Cloud API, E2B API and envd on one port)",
        description=(
            "Serve the AGS emulator on 127.0.0.1 until interrupted. It prints the environment "
            "variables that point the ags backend and the e2b / tencentcloud SDKs at it."
        ),
    )
    emulator.add_argument("--host", default="127.0.0.1", help="loopback address to bind")
    emulator.add_argument("--port", type=int, default=8900, help="port (0 picks a free one)")
    emulator.add_argument(
        "--backend",
        choices=("local", "docker"),
        default="local",
        help="backend that runs the instances (docker: the instance image is a Docker image)",
    )
    emulator.add_argument(
        "--local-isolation",
        choices=("none", "namespace"),
        default=None,
        help="isolation of local instances (default: namespace where bubblewrap works)",
    )
    emulator.add_argument("--default-image", help="image of the ready 'default' tool")
    emulator.add_argument(
        "--secret-id", help="SecretId to accept (default: random, printed at start)"
    )
    emulator.add_argument(
        "--secret-key", help="SecretKey to accept (default: random, printed at start)"
    )
    emulator.add_argument("--api-key", help="ark_ API key to accept (default: random)")
    emulator.add_argument(
        "--tcr-domain",
        help="registry (host:port) behind the emulated TCR instance, e.g. a local docker-registry",
    )
    emulator.add_argument(
        "--tcr-login",
        metavar="USER:PASSWORD",
        help="the login that registry accepts, handed out by CreateInstanceToken (local use)",
    )
    emulator.add_argument(
        "--no-e2b-checkpoint-routes",
        dest="e2b_checkpoint_routes",
        action="store_false",
        help="serve no e2b pause / resume / snapshot / fork routes (as an older e2b service)",
    )
    add_fault_arguments(
        emulator,
        "sandbox_runtime_emulators.ags._faults:parse_fault_spec",
        "planes cloud, e2b, envd; "
        "kinds rate_limit, unavailable, drop, slow, drop_answer, kill_instance",
    )
    add_limit_arguments(
        emulator,
        "a Cloud API action such as StartSandboxInstance, or an E2B route such as "
        "'POST /sandboxes'; Cloud API quotas are per SecretId, in one-second windows",
        "AGS's documented frequency limits (Start/Stop/AcquireToken 100/s, other actions 20/s)",
    )
    emulator.set_defaults(handler=_emulator)


def _default_isolation(backend: str) -> str | None:
    if backend != "local":
        return None
    from sandbox_runtime.backends.local import LocalBackend, LocalOptions

    usable = LocalBackend.availability(LocalOptions(isolation="namespace"))
    return "namespace" if usable else "none"


def _emulator(args: argparse.Namespace) -> int:
    from sandbox_runtime_emulators.ags.server import AgsEmulator

    isolation = args.local_isolation or _default_isolation(args.backend)
    login = None
    if args.tcr_login:
        user, sep, password = args.tcr_login.partition(":")
        if not sep:
            raise ConfigError("--tcr-login must look like USER:PASSWORD")
        login = (user, password)
    emulator = AgsEmulator(
        backend=args.backend,
        host=args.host,
        port=args.port,
        secret_id=args.secret_id,
        secret_key=args.secret_key,
        api_key=args.api_key,
        default_image=args.default_image,
        local_isolation=isolation,
        tcr_domain=args.tcr_domain,
        tcr_login=login,
        e2b_checkpoint_routes=args.e2b_checkpoint_routes,
        faults=args.fault,
        fault_seed=args.fault_seed,
        rate_limits=quotas(args.rate_limit, _realistic_quotas()),
        latencies=dict(args.latency),
    )

    async def run() -> None:
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        assert task is not None
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, task.cancel)
        server = loop.create_task(emulator.serve())
        while not emulator.ready and not server.done():
            await asyncio.sleep(0.01)
        if server.done():
            await server
            return
        print(f"AGS emulator on {emulator.url} (instances: {args.backend}", end="")
        print(f", isolation {isolation})" if isolation else ")")
        for operation, quota in emulator.api_limits.quotas.items():
            print(f"# rate limit {operation}: {quota.qps:g}/s, {quota.capacity} at once")
        for operation, seconds in emulator.api_limits.latencies.items():
            print(f"# latency {operation}: {seconds:g}s")
        print("# point the ags backend and the SDKs at it (this prints secrets: local use only):")
        for name, value in emulator.environment().items():
            print(f"export {name}={value}")
        registry = emulator.tcr.registry
        print(f"# TCR instance {registry.registry_id} pushes to {registry.domain}")
        sys.stdout.flush()
        await server

    with contextlib.suppress(asyncio.CancelledError, KeyboardInterrupt):
        asyncio.run(run())
    return 0


def _realistic_quotas() -> dict[str, Any]:
    from sandbox_runtime_emulators.ags._limits import REALISTIC_QUOTAS

    return dict(REALISTIC_QUOTAS)
