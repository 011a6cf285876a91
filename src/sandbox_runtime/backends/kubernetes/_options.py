"""Options of the ``kubernetes`` backend (``SandboxConfig.options``)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, SecretStr, field_validator

from sandbox_runtime.backend_kit import (
    BackendOptions,
)
from sandbox_runtime.backend_kit.agent import (
    AgentMode,
)

from ._names import (
    dns1123_label_problem,
    dns1123_subdomain_problem,
    label_key_problem,
    label_value_problem,
    memory_bytes,
)

__all__ = ["KubernetesOptions"]


class KubernetesOptions(BackendOptions):
    """Where the pods go and how they look; the cluster itself comes from a kubeconfig."""

    kubeconfig: str | None = None
    """Path of the kubeconfig file; default: ``KUBECONFIG``, then ``~/.kube/config``."""
    context: str | None = None
    """Kubeconfig context to use; default: its ``current-context``."""
    in_cluster: bool = False
    """Use the service account of the pod this client runs in (and no kubeconfig).

    Without a kubeconfig file, the in-cluster account is also used when ``KUBERNETES_SERVICE_HOST``
    is set, as ``kubectl`` does.
    """
    api_server: str | None = None
    """API server URL overriding the kubeconfig's (e.g. the emulator's ``https://127.0.0.1:PORT``)."""
    ca_cert: str | None = None
    """PEM file of the CA that signed the API server's certificate, overriding the kubeconfig's
    (the emulator's ``ca_file``, or a cluster's CA when ``api_server`` is given without one)."""
    token: SecretStr | None = Field(default=None, repr=False)
    """Bearer token overriding the kubeconfig's credentials; never printed."""
    namespace: str | None = None
    """Namespace of the pods; default: the kubeconfig context's namespace, else ``default``."""
    service_account: str | None = None
    """Service account the pods run as; default: the namespace's ``default``."""
    automount_service_account_token: bool = False
    """Mount an API token into the pod; off, so code in the sandbox cannot call the cluster."""
    image_pull_policy: Literal["IfNotPresent", "Always", "Never"] = "IfNotPresent"
    """When the node pulls the image."""
    image_pull_secrets: list[str] = Field(default_factory=list)
    """Names of registry secrets in the namespace, for private images."""
    node_selector: dict[str, str] = Field(default_factory=dict)
    """Node labels the pods must be scheduled on (``{"pool": "sandboxes"}``)."""
    runtime_class_name: str | None = None
    """RuntimeClass of the pods, e.g. ``gvisor`` or ``kata`` for a stronger sandbox."""
    name_prefix: str = "sandbox-runtime-"
    """Prefix of pod names; a random suffix of 16 characters follows."""
    api_timeout: float = Field(default=30.0, gt=0)
    """Seconds before one API request is abandoned."""
    max_pool_size: int = Field(default=64, gt=0)
    """HTTP connections kept to the API server; raise it for many parallel sandboxes."""
    api_qps: float | None = Field(default=None, gt=0)
    """Requests per second this process sends the API server, shared by all its sandboxes
    (``None``: no client-side quota; a 429's ``Retry-After`` still pauses every call).
    client-go's default, which kubectl and controllers use, is 5."""
    api_burst: int | None = Field(default=None, ge=1)
    """Requests allowed at once above ``api_qps`` (default: one second's worth; client-go: 10)."""

    agent: AgentMode = "auto"
    """The in-sandbox agent (fast exec and files; see :mod:`sandbox_runtime._envd.agent`),
    reached at the pod's IP, so only from where pod IPs route (in the cluster, or a local
    one): ``auto`` uses it once it answers and the native exec until then (for an image
    whose agent answered before, after a wait of a few seconds for it) or if it never does;
    ``on`` requires it (the start waits for it); ``off`` never starts it."""
    agent_wait: float = Field(default=30.0, gt=0)
    """Seconds after start to look for the agent before settling on the native exec."""

    checkpoint_dir: str | None = None
    """Directory of this client's filesystem checkpoints (tar archives; see
    ``docs/checkpoints.md``); default: ``SANDBOX_RUNTIME_CHECKPOINT_DIR``, else
    ``$XDG_STATE_HOME/sandbox-runtime/checkpoints``."""

    checkpoint_method: Literal["auto", "snapshot", "archive"] = "archive"
    """How checkpoints are kept (``docs/checkpoints.md``): ``snapshot`` keeps the workdir on a
    PersistentVolumeClaim and checkpoints it as a CSI ``VolumeSnapshot``, which forks and
    rollbacks restore as new claims (no archive moves through this client); ``archive`` reads
    the captured paths as tar into ``checkpoint_dir``; ``auto`` takes ``snapshot`` where the
    cluster serves ``snapshot.storage.k8s.io/v1`` with a usable class and only the workdir is
    captured (no ``checkpoint_paths``), else ``archive``.  ``archive`` is the default because
    the snapshot path changes every start, forked or not: a claim is provisioned (seconds on a
    cloud disk) and seeded with the image's workdir, and the account needs rights on claims
    and snapshots; ask for ``auto`` where sandboxes are forked (``run --group``)."""
    volume_snapshot_class: str | None = None
    """VolumeSnapshotClass of the snapshot path; default: the class annotated
    ``snapshot.storage.kubernetes.io/is-default-class: "true"``, else the only one."""
    storage_class: str | None = None
    """StorageClass of the workdir's claim on the snapshot path (its CSI driver must be the
    snapshot class's); default: the cluster's default."""
    volume_size: str = "10Gi"
    """Size the workdir's claim asks for on the snapshot path (a Kubernetes quantity)."""

    @field_validator("namespace", "service_account", "runtime_class_name")
    @classmethod
    def _check_dns_name(cls, value: str | None) -> str | None:
        if value is not None:
            problem = dns1123_subdomain_problem(value)
            if problem:
                raise ValueError(f"{value!r}: {problem}")
        return value

    @field_validator("name_prefix")
    @classmethod
    def _check_prefix(cls, value: str) -> str:
        if len(value) > 47:
            raise ValueError("must be at most 47 characters (pod names are at most 63)")
        probe = value + "0"
        problem = dns1123_label_problem(probe)
        if problem or not value[:1].isalpha():
            raise ValueError(
                f"{value!r} must be lowercase letters, digits and '-', starting with a letter"
            )
        return value

    @field_validator("node_selector")
    @classmethod
    def _check_selector(cls, value: dict[str, str]) -> dict[str, str]:
        for key, label in value.items():
            problem = label_key_problem(key) or label_value_problem(label)
            if problem:
                raise ValueError(f"{key}={label}: {problem}")
        return value

    @field_validator("volume_size")
    @classmethod
    def _check_size(cls, value: str) -> str:
        try:
            if memory_bytes(value) <= 0:
                raise ValueError
        except ValueError as exc:
            raise ValueError(f"{value!r} is not a positive Kubernetes quantity (say 10Gi)") from exc
        return value

    @field_validator("api_server")
    @classmethod
    def _check_server(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError(f"must be an http:// or https:// URL, got {value!r}")
        return value.rstrip("/") if value else value
