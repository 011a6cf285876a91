"""Running the Kubernetes emulator: in this process on a background thread.

::

    with KubernetesEmulator() as emulator:
        kubeconfig = emulator.write_kubeconfig(tmp_path / "kubeconfig")
        config = SandboxConfig(backend="kubernetes", image="python:3.12-slim",
                               options={"kubeconfig": str(kubeconfig)})

It binds 127.0.0.1 only; nothing here is meant to be reachable from elsewhere.  It speaks
HTTPS with a CA and serving certificate made for this emulator alone (``_tls``), whose CA the
kubeconfig it writes carries as ``certificate-authority-data``, as a real cluster's does;
``tls=False`` serves plain HTTP instead (kubectl then sends no token).  Requests need
``Authorization: Bearer <token>`` (a random token unless one is given, or none at all with
``auth=False``).  Pods run as Docker containers on the engine that ``DOCKER_HOST`` (or
``docker_host``) names; ``offline_images=True`` runs them from images the engine already has,
whatever their pull policy, and never pulls.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import secrets
import shutil
import tempfile
import threading
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from pydantic import SecretStr

from sandbox_runtime_emulators._random_faults import FaultDraws, RandomFaults
from sandbox_runtime_emulators._ratelimit import Quota, ServerLimits

from ._docker import DockerRuntime
from ._exec import CHANNEL_PROTOCOLS
from ._http import EmulatorServer
from ._pods import PodStore
from ._tls import ServingCertificates, make_certificates
from ._volumes import DEFAULT_CLASS_ANNOTATION, DRIVER

__all__ = ["REALISTIC_QUOTAS", "KubernetesEmulator"]

#: The ``realistic`` preset: each client (bearer token) gets client-go's default budget, 5
#: requests per second with bursts of 10 (``rest.Config`` QPS/Burst defaults, which the
#: ``kubernetes`` backend's ``api_qps``/``api_burst`` mirror), enforced by the server the
#: way API Priority and Fairness refuses a client over its share: 429 with ``Retry-After``.
#: kube-apiserver's own defaults, ``--max-requests-inflight=400`` and
#: ``--max-mutating-requests-inflight=200``, bound requests *in flight*, which one client of
#: a few hundred sandboxes does not reach; they are not emulated.
REALISTIC_QUOTAS: dict[str, Quota] = {"*": Quota(5, 10)}

logger = logging.getLogger("sandbox_runtime_emulators.kubernetes")

_LOOPBACK = ("127.0.0.1", "localhost", "::1")


class KubernetesEmulator:
    """A Kubernetes API server subset on ``host:port`` (port 0 picks a free one)."""

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        token: str | None = None,
        auth: bool = True,
        docker_host: str | None = None,
        node_name: str = "sandbox-runtime-emulator",
        channel_protocols: tuple[str, ...] = CHANNEL_PROTOCOLS,
        faults: Sequence[RandomFaults] = (),
        fault_seed: int | None = None,
        tls: bool = True,
        offline_images: bool = False,
        rate_limits: Mapping[str, Quota] | Iterable[tuple[str, Quota]] = (),
        latencies: Mapping[str, float] | Iterable[tuple[str, float]] = (),
    ) -> None:
        if host not in _LOOPBACK:
            raise ValueError(f"the emulator only listens on loopback addresses, not {host!r}")
        self.host = host
        self.port = port
        self._token = (token or secrets.token_urlsafe(24)) if auth else None
        self._docker_host = docker_host
        self._node_name = node_name
        self._protocols = tuple(channel_protocols)
        self._tls = tls
        #: Run pods from images the engine has, whatever the pull policy; never pull.
        self.offline_images = offline_images
        self._certificates: ServingCertificates | None = None
        self._private_dir: Path | None = None
        #: Random faults in force (``--fault``); more can be added while it runs.
        self.faults = FaultDraws(fault_seed, faults)
        #: Per-client quotas (token buckets) by verb, ``*`` for every request, and latencies
        #: by verb: off unless given; :data:`REALISTIC_QUOTAS` is the ``realistic`` preset.
        self.api_limits = ServerLimits(rate_limits, latencies)
        self._server: EmulatorServer | None = None
        self._thread: threading.Thread | None = None
        self.store: PodStore | None = None

    def __repr__(self) -> str:
        return f"KubernetesEmulator(url={self.url!r}, auth={self._token is not None})"

    @property
    def url(self) -> str:
        """Base URL of the API server (what a kubeconfig's ``cluster.server`` holds)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{'https' if self._tls else 'http'}://{host}:{self.port}"

    @property
    def ca_file(self) -> Path | None:
        """PEM file of the CA that signed the serving certificate (``None`` over plain HTTP).

        It exists while the emulator runs, in a directory only this user can read.
        """
        return None if self._certificates is None else self._certificates.ca_file

    @property
    def ca_pem(self) -> bytes | None:
        """The CA certificate as PEM (``None`` over plain HTTP, or before :meth:`start`)."""
        return None if self._certificates is None else self._certificates.ca_pem

    def _cluster(self) -> dict[str, Any]:
        cluster: dict[str, Any] = {"server": self.url}
        if self._tls:
            if self._certificates is None:
                raise RuntimeError("start the emulator first: its CA is made when it starts")
            data = base64.b64encode(self._certificates.ca_pem).decode("ascii")
            cluster["certificate-authority-data"] = data
        return cluster

    @property
    def token(self) -> SecretStr | None:
        """The bearer token requests must carry; ``None`` when authentication is off."""
        return None if self._token is None else SecretStr(self._token)

    def kubeconfig(self, namespace: str = "default") -> dict[str, Any]:
        """A kubeconfig (as a dict) with one context pointing at this emulator."""
        user: dict[str, Any] = {} if self._token is None else {"token": self._token}
        return {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "emulator", "cluster": self._cluster()}],
            "users": [{"name": "emulator", "user": user}],
            "contexts": [
                {
                    "name": "emulator",
                    "context": {"cluster": "emulator", "user": "emulator", "namespace": namespace},
                }
            ],
            "current-context": "emulator",
        }

    def write_kubeconfig(self, path: str | os.PathLike[str], namespace: str = "default") -> Path:
        """Write :meth:`kubeconfig` to ``path`` (JSON, which is YAML too), readable only by us."""
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        descriptor = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            json.dump(self.kubeconfig(namespace), handle, indent=2)
        return target

    def backend_options(self, **overrides: Any) -> dict[str, Any]:
        """Options of the ``kubernetes`` backend pointing straight at this emulator."""
        options: dict[str, Any] = {"api_server": self.url}
        if self._tls:
            self._cluster()  # raises before start
            options["ca_cert"] = str(self.ca_file)
        if self._token is not None:
            options["token"] = SecretStr(self._token)
        options.update(overrides)
        return options

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self) -> KubernetesEmulator:
        """Bind the port and serve on a background thread; returns once requests are served."""
        if self._server is not None:
            return self
        runtime = DockerRuntime(self._docker_host, offline=self.offline_images)
        runtime.ping()
        context = None
        if self._tls:
            self._private_dir = Path(tempfile.mkdtemp(prefix="srt-k8s-emulator-"))
            self._certificates = make_certificates(self._private_dir)
            context = self._certificates.server_context()
        self.store = PodStore(runtime, self._node_name)
        self._server = EmulatorServer(
            (self.host, self.port),
            self.store,
            self._token,
            self._protocols,
            self.faults,
            ssl_context=context,
            limits=self.api_limits,
        )
        self.port = int(self._server.server_address[1])
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="k8s-emulator", daemon=True
        )
        self._thread.start()
        logger.info("Kubernetes emulator serving on %s", self.url)
        return self

    def add_snapshot_class(self, name: str = "emulator-snapshots", *, default: bool = True) -> None:
        """Create a VolumeSnapshotClass (the default one unless told).

        As installing a CSI snapshot driver does: the ``kubernetes`` backend then checkpoints
        through snapshots.
        """
        if self.store is None:
            raise RuntimeError("start the emulator first")
        annotations = {DEFAULT_CLASS_ANNOTATION: "true"} if default else {}
        self.store.volumes.create_class(
            {
                "metadata": {"name": name, "annotations": annotations},
                "driver": DRIVER,
                "deletionPolicy": "Delete",
            }
        )

    def serve_forever(self) -> None:
        """Serve in the calling thread until :meth:`close` is called from another one."""
        self.start()
        assert self._thread is not None
        self._thread.join()

    def close(self) -> None:
        """Stop serving and remove every pod's container; idempotent."""
        server, thread, store = self._server, self._thread, self.store
        if server is None:
            return
        self._server = None
        server.shutdown()
        server.server_close()
        if thread is not None:
            thread.join(timeout=30)
        if store is not None:
            store.close()
        if self._private_dir is not None:
            shutil.rmtree(self._private_dir, ignore_errors=True)
            self._private_dir = None
            self._certificates = None

    def __enter__(self) -> KubernetesEmulator:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()
