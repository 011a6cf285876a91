"""The ``ags`` backend: sandboxes as Tencent Cloud Agent Sandbox (AGS) instances.

Registered as the ``ags`` entry point; needs ``pip install 'sandbox-runtime-swe[ags]'``.
Modules: ``_options`` (:class:`AgsOptions`), ``_cloud`` (the typed Cloud API client every
AGS caller shares; the E2B-compatible REST control plane is the core's, shared with the
``e2b`` backend: ``backend_kit.agent.E2bApi``), ``_mapping`` (the
image -> tool file), ``_environment`` (the variables AGS users export), ``_reaper`` and
``_backend`` (:class:`AgsBackend`; commands and files through envd's protocol, no e2b SDK
needed: any release may be installed beside, or none).  ``manage`` is the tool management
behind ``sandbox-runtime ags`` (tools, instances, image sync, registry push), on ``_cloud``
and ``_mapping``.
See ``docs/ags.md`` for the guide and ``docs/ags-emulator.md`` for the local emulator.

The classes are imported on first use, so that ``_cloud`` and ``_mapping`` load without the
backend's own imports.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._backend import AgsBackend
    from ._options import AgsOptions

__all__ = ["AgsBackend", "AgsOptions"]


def __getattr__(name: str) -> Any:
    if name == "AgsBackend":
        from ._backend import AgsBackend

        return AgsBackend
    if name == "AgsOptions":
        from ._options import AgsOptions

        return AgsOptions
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
