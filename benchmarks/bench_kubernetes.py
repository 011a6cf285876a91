"""Start and exec latency of the kubernetes backend against the raw kubernetes client, in one run.

Both sides talk to the project's Kubernetes API emulator (pods are Docker containers of the
same image), interleaved round by round so that drift in the machine's load hits both alike:

- start: the raw client's ``create_namespaced_pod`` of an equivalent pod, then
  ``read_namespaced_pod`` until it is Running; against the backend's ``start``.
- exec: the raw client's ``stream(connect_get_namespaced_pod_exec, ["echo", "hi"])`` (what
  ``kubectl exec`` does, preloaded); against ``sandbox.exec("echo hi")``, which also wraps the
  command for cwd, env and a killable process group, and reads the exit code.
- for scale: the docker backend's exec of the same command on the same image.

The emulator is not a kube-apiserver: absolute numbers say nothing about a real cluster, the
ratios say what this library adds on top of the official client.

Usage: ``python benchmarks/bench_kubernetes.py [--rounds 20] [--image IMAGE]``.
"""

from __future__ import annotations

import argparse
import time
import uuid
from functools import partial
from typing import Any

from bench_core import DEFAULT_IMAGE, report, timed

from sandbox_runtime import SandboxConfig, SandboxRuntime
from sandbox_runtime_emulators.kubernetes import KubernetesEmulator


def _raw_pod(name: str, image: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "restartPolicy": "Never",
            "activeDeadlineSeconds": 600,
            "containers": [{"name": "sandbox", "image": image, "command": ["sleep", "600"]}],
        },
    }


def bench(image: str, rounds: int) -> None:
    from kubernetes import client, config
    from kubernetes.client.exceptions import ApiException
    from kubernetes.stream import stream

    with KubernetesEmulator() as emulator:
        api_client = config.new_client_from_config_dict(emulator.kubeconfig())  # type: ignore[no-untyped-call]
        core = client.CoreV1Api(api_client)
        options = emulator.backend_options()
        sandbox_config = SandboxConfig(backend="kubernetes", image=image, options=options)

        def raw_start(name: str) -> None:
            # The client serialises plain dicts as it does its models.
            core.create_namespaced_pod("default", _raw_pod(name, image))  # type: ignore[arg-type]
            while True:
                status = core.read_namespaced_pod(name, "default").status
                if status is not None and status.phase == "Running":
                    return
                time.sleep(0.05)

        def wait_gone(name: str) -> None:
            while True:
                try:
                    core.read_namespaced_pod(name, "default")
                except ApiException as exc:
                    if exc.status == 404:
                        return
                    raise
                time.sleep(0.02)

        with SandboxRuntime(sandbox_config):  # warm the image, the pools, the handshake
            pass
        start: dict[str, list[float]] = {"raw client create+poll": [], "sandbox-runtime start": []}
        for _ in range(rounds):
            name = f"bench-{uuid.uuid4().hex[:10]}"
            start["raw client create+poll"].append(timed(partial(raw_start, name))[0])
            core.delete_namespaced_pod(name, "default", grace_period_seconds=0)
            wait_gone(name)  # so the next start does not run beside a container removal
            sandbox = SandboxRuntime(sandbox_config)
            start["sandbox-runtime start"].append(timed(sandbox.start)[0])
            sandbox.close()
        report("kubernetes (emulator): start latency", start, "raw client create+poll")

        docker_config = SandboxConfig(backend="docker", image=image, lifetime=600)
        rows: dict[str, list[float]] = {
            "raw client exec (stream)": [],
            "sandbox-runtime exec": [],
            "docker backend exec": [],
        }
        with SandboxRuntime(sandbox_config) as sandbox, SandboxRuntime(docker_config) as docker:
            pod = sandbox.id

            def raw_exec() -> str:
                return str(
                    stream(
                        core.connect_get_namespaced_pod_exec,
                        pod,
                        "default",
                        command=["echo", "hi"],
                        stdout=True,
                        stderr=True,
                        stdin=False,
                        tty=False,
                    )
                )

            for _ in range(rounds * 3):
                rows["raw client exec (stream)"].append(timed(raw_exec)[0])
                rows["sandbox-runtime exec"].append(timed(lambda: sandbox.exec("echo hi"))[0])
                rows["docker backend exec"].append(timed(lambda: docker.exec("echo hi"))[0])
        report("kubernetes (emulator): exec latency (echo hi)", rows, "raw client exec (stream)")
        api_client.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--image", default=DEFAULT_IMAGE)
    args = parser.parse_args()
    bench(args.image, args.rounds)


if __name__ == "__main__":
    main()
