"""Pulling one image through the engine, with the registry's failures typed.

docker-py's ``pull`` without ``stream`` swallows a failure the engine reports inside its
progress stream (the answer is 200 and the error is a JSON line), so a failed pull used to
surface later as a confusing "No such image" at create.  Here the stream is read to its end
and every failure becomes :class:`~sandbox_runtime.errors.ImagePullError` naming the registry
and carrying its words.  Failures that another try can cure (the registry's 5xx, a reset or
timed-out connection, a refused connection while a registry restarts) are retried with
backoff; a missing manifest or a refused login is final at once.
"""

from __future__ import annotations

import logging
from typing import Any

from sandbox_runtime.backend_kit import RetryPolicy, call_with_retries
from sandbox_runtime.errors import ImagePullError

from ._client import docker, explain, requests, status_code

__all__ = ["PULL_POLICY", "pull", "registry_of"]

logger = logging.getLogger("sandbox_runtime.docker")

#: A pull is long and its failures are rarely cured fast: few attempts, a bounded wait.
PULL_POLICY = RetryPolicy(attempts=4, max_delay=120.0, initial_wait=0.5, max_wait=8.0)

_FINAL = (
    "manifest unknown",
    "not found",
    "unauthorized",
    "authentication required",
    "denied",
    "invalid reference format",
)
_TRANSIENT = (
    "connection reset",
    "connection refused",
    "timeout",
    "timed out",
    "i/o timeout",
    "eof",
    "unexpected http status: 5",
    "service unavailable",
    "bad gateway",
    "gateway timeout",
    "internal server error",
    "too many requests",
    "tls handshake",
    "broken pipe",
)


def registry_of(image: str) -> str:
    """The registry host an image reference names (``docker.io`` for a bare name)."""
    first, _, rest = image.partition("/")
    if rest and ("." in first or ":" in first or first == "localhost"):
        return first
    return "docker.io"


class _StreamError(Exception):
    """An error the engine reported inside a pull's progress stream."""


def _pull_once(api: Any, image: str) -> None:
    for chunk in api.pull(image, stream=True, decode=True):
        if isinstance(chunk, dict) and chunk.get("error"):
            detail = chunk.get("errorDetail") or {}
            raise _StreamError(str(detail.get("message") or chunk["error"]))


def _reason(exc: BaseException) -> str:
    if isinstance(exc, docker.errors.APIError):
        return explain(exc).strip()
    return str(exc).strip() or type(exc).__name__


def is_transient(exc: BaseException) -> bool:
    """Whether a failed pull is worth another try (see the module docstring)."""
    if isinstance(exc, (requests.exceptions.ConnectionError, requests.exceptions.Timeout)):
        return True
    status = status_code(exc)
    if status is not None and status in (401, 403, 404):
        return False
    text = _reason(exc).lower()
    if any(phrase in text for phrase in _FINAL):
        return False
    return any(phrase in text for phrase in _TRANSIENT) or (status is not None and status >= 500)


def pull(api: Any, image: str, *, policy: RetryPolicy = PULL_POLICY) -> None:
    """Pull ``image``; raise :class:`ImagePullError` naming its registry when that fails."""
    registry = registry_of(image)
    logger.info("pulling image %s from %s", image, registry)
    try:
        call_with_retries(
            lambda: _pull_once(api, image),
            is_transient,
            description=f"pull {image}",
            policy=policy,
        )
    except (
        _StreamError,
        docker.errors.DockerException,
        requests.exceptions.RequestException,
    ) as exc:
        reason = _reason(exc)
        transient = is_transient(exc)
        tried = f" after {policy.attempts} attempts" if transient else ""
        raise ImagePullError(
            f"cannot pull {image} from registry {registry}{tried}: {reason}",
            image=image,
            registry=registry,
            reason=reason,
            transient=transient,
        ) from exc
