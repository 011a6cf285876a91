"""Reaching the cluster, and reading the client's errors without leaking credentials.

Configuration comes from a kubeconfig or the pod's service account; one client is shared per
configuration.

REST calls go through the generated ``CoreV1Api`` with ``_preload_content=False`` and the
JSON is read here, so the backend sees plain dicts whatever model classes a client release
generates (30.x and 37.x differ there, not on the wire).
"""

from __future__ import annotations

import json
import os
import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sandbox_runtime.backend_kit import (
    retry_after_seconds,
)
from sandbox_runtime.errors import BackendUnavailableError

from ._options import KubernetesOptions

try:
    import kubernetes.client
    import kubernetes.config
    import urllib3.exceptions
    import urllib3.util
    from kubernetes.client.exceptions import ApiException
    from kubernetes.config.config_exception import ConfigException
except ImportError as exc:  # pragma: no cover - exercised by the registry's error path
    raise ImportError(
        "the kubernetes backend needs the kubernetes client: "
        "pip install 'sandbox-runtime-swe[kubernetes]'"
    ) from exc

__all__ = [
    "ApiException",
    "Cluster",
    "connect",
    "describe",
    "read_json",
    "retryable",
    "status_code",
    "unreachable",
]

#: The loaders are typed in some client releases and not in others; we call them untyped.
_loaders: Any = kubernetes.config
_SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
_HANDSHAKE = re.compile(r"Handshake status (\d{3})")
_HANDSHAKE_RETRY_AFTER = re.compile(r"'retry-after': '([^']+)'", re.I)


@dataclass(frozen=True)
class Cluster:
    """A configured client: the API, the namespace pods go in, and the server (for messages)."""

    api: Any  # kubernetes.client.CoreV1Api
    namespace: str
    server: str
    configuration: Any  # kubernetes.client.Configuration

    def __repr__(self) -> str:
        return f"Cluster(server={self.server!r}, namespace={self.namespace!r})"

    def exec_api(self) -> Any:
        """A ``CoreV1Api`` of its own for one exec.

        ``kubernetes.stream.stream`` swaps a method of the ``ApiClient`` it is given for the
        length of the call, so a REST call made meanwhile on the same client from another
        thread would go out as a websocket (and two overlapping execs can leave the swap in
        place for good).  A fresh ``ApiClient`` per exec is cheap (no connection is pooled
        for websockets) and keeps the shared one untouched.
        """
        return kubernetes.client.CoreV1Api(kubernetes.client.ApiClient(self.configuration))

    def custom_api(self) -> Any:
        """A ``CustomObjectsApi`` sharing the pooled client (for the snapshot group)."""
        return kubernetes.client.CustomObjectsApi(self.api.api_client)


_clusters: dict[tuple[Any, ...], Cluster] = {}
_clusters_lock = threading.Lock()


def _kubeconfig_path(options: KubernetesOptions) -> str:
    return options.kubeconfig or os.environ.get("KUBECONFIG") or "~/.kube/config"


def _kubeconfig_exists(path: str) -> bool:
    return any(Path(part).expanduser().is_file() for part in path.split(os.pathsep) if part)


def _load(options: KubernetesOptions) -> tuple[Any, str]:
    """A client ``Configuration`` and the namespace, from the sources the options name."""
    configuration = kubernetes.client.Configuration()
    namespace = "default"
    path = _kubeconfig_path(options)
    in_cluster = options.in_cluster or (
        not options.kubeconfig
        and not _kubeconfig_exists(path)
        and not options.api_server
        and "KUBERNETES_SERVICE_HOST" in os.environ
    )
    try:
        if in_cluster:
            _loaders.load_incluster_config(client_configuration=configuration)
            if _SERVICE_ACCOUNT_NAMESPACE.is_file():
                namespace = _SERVICE_ACCOUNT_NAMESPACE.read_text().strip() or namespace
        elif _kubeconfig_exists(path):
            expanded = os.pathsep.join(str(Path(p).expanduser()) for p in path.split(os.pathsep))
            _loaders.load_kube_config(
                config_file=expanded,
                context=options.context,
                client_configuration=configuration,
                persist_config=False,
            )
            contexts, current = _loaders.list_kube_config_contexts(expanded)
            chosen = next((c for c in contexts if c["name"] == options.context), current)
            namespace = (chosen or {}).get("context", {}).get("namespace") or namespace
        elif not options.api_server:
            raise BackendUnavailableError(
                f"no kubeconfig at {path} and not running in a cluster: set the kubeconfig "
                "option or KUBECONFIG, or in_cluster=True inside a pod"
            )
    except (ConfigException, OSError, ValueError, KeyError, TypeError) as exc:
        source = "the in-cluster service account" if in_cluster else f"kubeconfig {path}"
        raise BackendUnavailableError(f"cannot load {source}: {exc}") from exc
    if options.api_server:
        configuration.host = options.api_server
    if options.ca_cert:
        configuration.ssl_ca_cert = str(Path(options.ca_cert).expanduser())
    if options.token is not None:
        # The token given is the identity used: the kubeconfig loader installs a hook that
        # writes the kubeconfig's own token back before every request, so it goes too.
        # Both names: clients before 31 read "authorization", later ones "BearerToken".
        secret = options.token.get_secret_value()
        configuration.api_key = {"BearerToken": secret, "authorization": secret}
        configuration.api_key_prefix = {"BearerToken": "Bearer", "authorization": "Bearer"}
        configuration.refresh_api_key_hook = None
    configuration.connection_pool_maxsize = options.max_pool_size
    # urllib3 would sleep out a 429's Retry-After inside the one refused call, unseen; the
    # answer has to reach ``call_with_retries``, which pauses every call to the server.
    configuration.retries = urllib3.util.Retry(3, respect_retry_after_header=False)
    return configuration, options.namespace or namespace


def connect(options: KubernetesOptions) -> Cluster:
    """The shared client for these options (pool and credentials reused across sandboxes)."""
    token = options.token.get_secret_value() if options.token is not None else None
    key = (
        _kubeconfig_path(options),
        options.context,
        options.in_cluster,
        options.api_server,
        options.ca_cert,
        token,
        options.namespace,
        options.max_pool_size,
    )
    with _clusters_lock:
        cluster = _clusters.get(key)
        if cluster is None:
            configuration, namespace = _load(options)
            api = kubernetes.client.CoreV1Api(kubernetes.client.ApiClient(configuration))
            cluster = Cluster(api, namespace, str(configuration.host), configuration)
            _clusters[key] = cluster
        return cluster


def read_json(response: Any) -> Any:
    """The decoded body of a raw (``_preload_content=False``) response."""
    return json.loads(response.data or b"null")


def status_code(exc: BaseException) -> int | None:
    """The HTTP status of an API error, including a refused websocket handshake."""
    if not isinstance(exc, ApiException):
        return None
    if exc.status:
        return int(exc.status)
    match = _HANDSHAKE.search(str(exc.reason or ""))
    return int(match.group(1)) if match else None


def _status_message(exc: ApiException) -> str:
    """The server's ``Status.message`` if the body is one, else the HTTP reason phrase."""
    body = exc.body
    if isinstance(body, bytes):
        body = body.decode("utf-8", "replace")
    if isinstance(body, str) and body:
        try:
            status = json.loads(body)
        except ValueError:
            status = None
        if isinstance(status, dict) and status.get("message"):
            return str(status["message"])
    return str(exc.reason or "").split(" -+-+- ")[0].strip()


def describe(exc: BaseException) -> str:
    """A one-line account of a client error: status and the server's message, never headers.

    ``str(ApiException)`` prints response headers and bodies; we keep to what the server said
    about the request, which carries no credentials.
    """
    if isinstance(exc, ApiException):
        code = status_code(exc)
        message = _status_message(exc)
        return f"{code} {message}" if code else message
    if isinstance(exc, urllib3.exceptions.MaxRetryError) and exc.reason is not None:
        return f"{type(exc.reason).__name__}: {exc.reason}"
    return f"{type(exc).__name__}: {exc}"


def retryable(exc: BaseException) -> bool:
    """Connection failures, 429 and 5xx: worth another try on an idempotent call."""
    if isinstance(exc, (urllib3.exceptions.HTTPError, ConnectionError)):
        return True
    code = status_code(exc)
    return code is not None and (code == 429 or code >= 500)


def retry_after(exc: BaseException) -> float | None:
    """The ``Retry-After`` an API error asked for, in seconds.

    A REST answer carries it as a header; a refused websocket handshake only in the message
    the client builds from the answer's headers.
    """
    if not isinstance(exc, ApiException):
        return None
    headers = exc.headers or {}
    value = headers.get("Retry-After") if hasattr(headers, "get") else None
    if value is None:
        match = _HANDSHAKE_RETRY_AFTER.search(str(exc.reason or ""))
        value = match.group(1) if match else None
    return retry_after_seconds(str(value)) if value is not None else None


def handshake_refused(exc: BaseException) -> bool:
    """An exec upgrade that provably started nothing and is worth sending again.

    No command runs before the websocket upgrade completes: a handshake answered 429 or
    5xx, or a connection lost before any answer, means the exec never began.
    """
    code = status_code(exc)
    if code is not None:
        return code == 429 or code >= 500
    if isinstance(exc, ApiException):
        return "Connection to remote host was lost" in str(exc.reason or "")
    return isinstance(exc, ConnectionRefusedError)


def unreachable(exc: BaseException) -> bool:
    """True when the request never got an HTTP answer (the server is down or unreachable)."""
    return isinstance(exc, (urllib3.exceptions.HTTPError, ConnectionError))
