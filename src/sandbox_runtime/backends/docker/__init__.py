"""The ``docker`` backend: one container per sandbox, through docker-py's Engine API client.

Modules: ``_options`` (:class:`DockerOptions`), ``_client`` (the shared client per engine,
reading its errors), ``_exec`` (one exec's hijacked stream under a deadline, shared with the
Kubernetes emulator), ``_backend`` (:class:`DockerBackend`).  Needs
``pip install 'sandbox-runtime[docker]'``.

The classes are imported on first use, so that ``_options`` loads without docker-py.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._backend import DockerBackend
    from ._options import DockerOptions

__all__ = ["DockerBackend", "DockerOptions"]


def __getattr__(name: str) -> Any:
    if name == "DockerBackend":
        from ._backend import DockerBackend

        return DockerBackend
    if name == "DockerOptions":
        from ._options import DockerOptions

        return DockerOptions
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
