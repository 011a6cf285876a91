"""``Status`` objects: how the API server says what went wrong (and how exec says how it ended).

Clients read ``code``, ``reason`` and ``details`` rather than the message, so those follow the
real server field for field: ``NotFound`` 404 with ``details.kind`` the resource (``pods``),
``AlreadyExists`` 409, ``Invalid`` 422 with one cause per bad field, ``BadRequest`` 400,
``Unauthorized`` 401, ``Forbidden`` 403 (admission: a terminating namespace, a missing
service account, a protected namespace), ``MethodNotAllowed`` 405.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = [
    "ApiError",
    "already_exists",
    "bad_request",
    "exec_failure",
    "exec_success",
    "forbidden",
    "invalid",
    "method_not_allowed",
    "not_found",
    "unauthorized",
]


class ApiError(Exception):
    """An error answer: the HTTP code and the ``Status`` body that goes with it."""

    def __init__(
        self, code: int, reason: str, message: str, details: dict[str, Any] | None = None
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details

    def body(self) -> dict[str, Any]:
        """The ``Status`` object sent as the response body."""
        status: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details is not None:
            status["details"] = self.details
        return status


def not_found(resource: str, name: str) -> ApiError:
    """``pods "x" not found``."""
    return ApiError(
        404, "NotFound", f'{resource} "{name}" not found', {"name": name, "kind": resource}
    )


def already_exists(resource: str, name: str) -> ApiError:
    """``pods "x" already exists``."""
    return ApiError(
        409,
        "AlreadyExists",
        f'{resource} "{name}" already exists',
        {"name": name, "kind": resource},
    )


def invalid(kind: str, name: str, causes: Sequence[tuple[str, str]]) -> ApiError:
    """422 with one ``FieldValueInvalid`` cause per ``(field, message)``."""
    summary = ", ".join(f"{field}: {message}" for field, message in causes)
    details = {
        "name": name,
        "kind": kind,
        "causes": [
            {"reason": "FieldValueInvalid", "message": message, "field": field}
            for field, message in causes
        ],
    }
    return ApiError(422, "Invalid", f'{kind} "{name}" is invalid: {summary}', details)


def forbidden(resource: str, name: str, why: str) -> ApiError:
    """403 ``pods "x" is forbidden: <why>``, as admission plugins refuse a request."""
    return ApiError(
        403,
        "Forbidden",
        f'{resource} "{name}" is forbidden: {why}',
        {"name": name, "kind": resource},
    )


def bad_request(message: str) -> ApiError:
    """400 BadRequest."""
    return ApiError(400, "BadRequest", message)


def unauthorized() -> ApiError:
    """401, with the same one-word message the real server gives (it never echoes the token)."""
    return ApiError(401, "Unauthorized", "Unauthorized")


def method_not_allowed() -> ApiError:
    """405 for verbs the emulator does not serve on a resource."""
    return ApiError(
        405, "MethodNotAllowed", "the server does not allow this method on the requested resource"
    )


def exec_success() -> dict[str, Any]:
    """The error-channel message of a command that exited 0."""
    return {"metadata": {}, "status": "Success"}


def exec_failure(argv: Sequence[str], exit_code: int) -> dict[str, Any]:
    """The error-channel message of a command that exited non-zero (``NonZeroExitCode``)."""
    return {
        "metadata": {},
        "status": "Failure",
        "message": (
            f"command terminated with non-zero exit code: error executing command "
            f"[{' '.join(argv)}], exit code {exit_code}"
        ),
        "reason": "NonZeroExitCode",
        "details": {"causes": [{"reason": "ExitCode", "message": str(exit_code)}]},
    }
