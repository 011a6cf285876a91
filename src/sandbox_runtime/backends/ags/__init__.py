"""The ``ags`` backend: sandboxes as Tencent Cloud Agent Sandbox (AGS) instances.

Registered as the ``ags`` entry point; needs ``pip install 'sandbox-runtime[ags]'``.
Modules: ``cloud`` (the typed Cloud API client every AGS caller shares), ``mapping`` (the
image -> tool file), ``environment`` (the variables AGS users export), ``_options``, ``envd``
(our envd client), ``e2b_api`` (the E2B-compatible REST control plane), ``_reaper`` and
``backend`` (:class:`AgsBackend`).  No e2b SDK is needed: any release may be installed
beside, or none.  Tool management
(:mod:`sandbox_runtime.ags`) sits above this package and uses ``cloud`` and ``mapping``.
See ``docs/ags.md`` for the guide and ``docs/ags-emulator.md`` for the local emulator.

The classes are imported on first use, so that ``cloud`` and ``mapping`` load without the
backend's own imports.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._options import AgsOptions
    from .backend import AgsBackend

__all__ = ["AgsBackend", "AgsOptions"]


def __getattr__(name: str) -> Any:
    if name == "AgsBackend":
        from .backend import AgsBackend

        return AgsBackend
    if name == "AgsOptions":
        from ._options import AgsOptions

        return AgsOptions
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
