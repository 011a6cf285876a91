"""The ``e2b`` backend: sandboxes on any e2b-protocol service.

e2b itself, a self-hosted e2b, ROCK, OpenKruise agents, AGS's E2B-compatible door.
Registered as the ``e2b`` entry point; needs ``httpx`` (``pip install
'sandbox-runtime-swe[e2b]'``).  Modules: ``_options`` (:class:`E2bOptions`, read from the e2b
SDK's environment variables), ``_backend`` (:class:`E2bBackend`), ``_checkpoints`` (the
service's snapshots through the core's ``SnapshotBook``, or the archive store without
snapshot routes).  See ``docs/e2b.md``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._backend import E2bBackend
    from ._options import E2bOptions

__all__ = ["E2bBackend", "E2bOptions"]


def __getattr__(name: str) -> Any:
    if name == "E2bBackend":
        from ._backend import E2bBackend

        return E2bBackend
    if name == "E2bOptions":
        from ._options import E2bOptions

        return E2bOptions
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
