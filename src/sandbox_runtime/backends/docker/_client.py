"""The shared Engine API client per engine, and how its errors read (retryable, gone).

docker-py is imported here once, with the install hint when it is missing.
"""

from __future__ import annotations

import threading
from typing import Any

from sandbox_runtime.backends.docker._options import DockerOptions
from sandbox_runtime.errors import BackendUnavailableError

try:
    import docker
    import docker.errors
    import requests.exceptions
except ImportError as exc:  # pragma: no cover - exercised by the registry's error path
    raise ImportError(
        "the docker backend needs docker-py: pip install 'sandbox-runtime-swe[docker]'"
    ) from exc

__all__ = [
    "docker",
    "engine_client",
    "explain",
    "is_gone",
    "requests",
    "retryable",
    "start_retryable",
    "status_code",
]

_clients: dict[tuple[str | None, str, float, int], Any] = {}
_clients_lock = threading.Lock()


def engine_client(options: DockerOptions) -> Any:
    """One shared ``APIClient`` per engine: the version handshake and the pool are reused."""
    key = (options.docker_host, options.api_version, options.api_timeout, options.max_pool_size)
    with _clients_lock:
        client = _clients.get(key)
        if client is None:
            kwargs: dict[str, Any] = docker.utils.kwargs_from_env()
            if options.docker_host:
                kwargs["base_url"] = options.docker_host
            try:
                client = docker.APIClient(
                    version=options.api_version,
                    timeout=options.api_timeout,
                    max_pool_size=options.max_pool_size,
                    **kwargs,
                )
            except docker.errors.DockerException as exc:
                where = kwargs.get("base_url", "the default socket")
                raise BackendUnavailableError(
                    f"cannot reach the Docker engine at {where}: {exc}"
                ) from exc
            _clients[key] = client
        return client


def status_code(exc: BaseException) -> int | None:
    return getattr(exc, "status_code", None) if isinstance(exc, docker.errors.APIError) else None


def retryable(exc: BaseException) -> bool:
    """Connection failures and 5xx answers are worth another try on idempotent calls."""
    if isinstance(exc, (requests.exceptions.ConnectionError, requests.exceptions.Timeout)):
        return True
    status = status_code(exc)
    return status is not None and status >= 500 and not is_gone(exc)


def start_retryable(exc: BaseException) -> bool:
    """:func:`retryable`, less the OCI runtime's refusals, which no retry changes.

    A runtime that cannot create the container (capabilities a privileged container needs
    and this host withholds, a seccomp profile, a missing command) answers 500 like a
    passing engine fault; and with auto-remove on, the failed container is gone by the next
    attempt, whose "No such container" would hide the reason.
    """
    text = explain(exc)
    refused = "OCI runtime" in text or "failed to create shim" in text
    return retryable(exc) and not refused


def explain(exc: BaseException) -> str:
    if isinstance(exc, docker.errors.APIError):
        return str(exc.explanation or exc)
    return str(exc)


def is_gone(exc: BaseException) -> bool:
    """The engine says the container no longer exists or no longer runs.

    Engines disagree on the status (404, 409, or 500 for "Removal In Progress"), so the
    message decides.
    """
    if not isinstance(exc, docker.errors.APIError):
        return False
    text = explain(exc).lower()
    return any(
        phrase in text
        for phrase in ("no such container", "is not running", "removal in progress", "is paused")
    )
