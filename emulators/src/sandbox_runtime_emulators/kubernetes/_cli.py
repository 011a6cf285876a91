"""``sandbox-runtime kubernetes emulator``: the local Kubernetes API emulator in the foreground.

Registered under the library's ``kubernetes`` command through the ``sandbox_runtime.emulators``
entry point, and under ``sandbox-runtime-emulator kubernetes``.  The emulator's imports
(docker-py, wsproto) happen in the handler, so listing commands stays fast.
"""

from __future__ import annotations

import argparse
import signal
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

from sandbox_runtime_emulators._cli_args import add_fault_arguments, add_limit_arguments, quotas

__all__ = ["register"]


def register(commands: Any, name: str = "emulator") -> None:
    """Add the emulator's command, as ``name``, to a group's subcommands."""
    emulator = commands.add_parser(
        name,
        help="run the local Kubernetes API emulator (pods are Docker containers)",
        description=(
            "Serve a Kubernetes API subset on 127.0.0.1 until interrupted, with every pod a "
            "Docker container, over HTTPS with a CA made for it. It writes a kubeconfig for "
            "it (with that CA) and prints the KUBECONFIG line that points kubectl, the "
            "kubernetes backend and the kubernetes client at it."
        ),
    )
    emulator.add_argument("--host", default="127.0.0.1", help="loopback address to bind")
    emulator.add_argument("--port", type=int, default=8901, help="port (0 picks a free one)")
    emulator.add_argument("--token", help="bearer token to accept (default: random)")
    emulator.add_argument("--no-auth", action="store_true", help="accept requests without a token")
    emulator.add_argument(
        "--plain-http",
        action="store_true",
        help="serve plain HTTP instead of HTTPS with the emulator's own CA (kubectl then sends "
        "no token: use it with --no-auth)",
    )
    emulator.add_argument(
        "--offline-images",
        action="store_true",
        help="start pods from images the Docker engine already has, whatever their "
        "imagePullPolicy, and never pull (each pod's events say so)",
    )
    emulator.add_argument(
        "--snapshot-class",
        metavar="NAME",
        help="create a default VolumeSnapshotClass of this name, as a cluster with a CSI "
        "snapshot driver has (the kubernetes backend then checkpoints through snapshots)",
    )
    emulator.add_argument(
        "--kubeconfig",
        type=Path,
        help="where to write the kubeconfig (default: a new file in the temp directory)",
    )
    emulator.add_argument("--namespace", default="default", help="the kubeconfig's namespace")
    emulator.add_argument("--docker-host", help="Docker engine for the pods (default: DOCKER_HOST)")
    add_fault_arguments(
        emulator,
        "sandbox_runtime_emulators.kubernetes._http:parse_fault_spec",
        "planes api, exec; kinds rate_limit, unavailable, drop, slow, drop_answer, kill_pod",
    )
    add_limit_arguments(
        emulator,
        "a verb: get, list, watch, create, update, patch, delete, exec, attach, log; "
        "quotas are token buckets per client (bearer token)",
        "client-go's default budget per client, *=5:10",
    )
    emulator.set_defaults(handler=_emulator)


def _emulator(args: argparse.Namespace) -> int:
    from sandbox_runtime_emulators.kubernetes.server import KubernetesEmulator

    emulator = KubernetesEmulator(
        host=args.host,
        port=args.port,
        token=args.token,
        auth=not args.no_auth,
        docker_host=args.docker_host,
        faults=args.fault,
        fault_seed=args.fault_seed,
        tls=not args.plain_http,
        offline_images=args.offline_images,
        rate_limits=quotas(args.rate_limit, _realistic_quotas()),
        latencies=dict(args.latency),
    )
    try:
        emulator.start()
    except Exception as exc:  # the engine is down, the port is taken: say so and stop
        print(f"cannot start the Kubernetes emulator: {exc}", file=sys.stderr)
        return 1
    if args.snapshot_class:
        emulator.add_snapshot_class(args.snapshot_class)
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    try:
        target = args.kubeconfig or Path(tempfile.mkdtemp(prefix="srt-k8s-")) / "kubeconfig"
        path = emulator.write_kubeconfig(target, namespace=args.namespace)
        offline = ", offline images" if args.offline_images else ""
        print(f"Kubernetes emulator on {emulator.url} (pods run on Docker{offline})")
        print(f"# the kubeconfig holds the token: local use only ({path})")
        for operation, quota in emulator.api_limits.quotas.items():
            print(f"# rate limit {operation}: {quota.qps:g}/s, {quota.capacity} at once")
        for operation, seconds in emulator.api_limits.latencies.items():
            print(f"# latency {operation}: {seconds:g}s")
        if args.snapshot_class:
            print(f"# default VolumeSnapshotClass: {args.snapshot_class}")
        print(f"export KUBECONFIG={path}")
        sys.stdout.flush()
        stop.wait()
    finally:
        emulator.close()
        limits = emulator.api_limits
        if limits.quotas:
            print(
                f"rate limits: {limits.admitted} requests admitted, {limits.refused} refused",
                file=sys.stderr,
            )
    return 0


def _realistic_quotas() -> dict[str, Any]:
    from sandbox_runtime_emulators.kubernetes.server import REALISTIC_QUOTAS

    return dict(REALISTIC_QUOTAS)
