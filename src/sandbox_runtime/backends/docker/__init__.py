"""The ``docker`` backend: one container per sandbox, through docker-py's Engine API client.

Modules: ``_options`` (:class:`DockerOptions`), ``_client`` (the shared client per engine,
reading its errors), ``_exec`` (one exec's hijacked stream under a deadline, shared with the
Kubernetes emulator), ``_backend`` (:class:`DockerBackend`).  Needs
``pip install 'sandbox-runtime-swe[docker]'``.
"""

from __future__ import annotations

from ._backend import DockerBackend
from ._options import DockerOptions

__all__ = ["DockerBackend", "DockerOptions"]
