"""A local emulator of Tencent Cloud Agent Sandbox (AGS), wire-compatible with the real SDKs.

One ASGI application on 127.0.0.1 serves the Tencent Cloud API (``X-TC-Action``: AGS, and
the few TCR actions an image push needs), the
E2B-compatible REST API (``/sandboxes``, ``/v2/sandboxes``) and envd (``/files``,
``process.Process``, ``filesystem.Filesystem``), so the unmodified ``tencentcloud-sdk-python-ags``
and ``e2b`` clients work against it.  Instances really run, in sandboxes of another backend.
Start it with :class:`AgsEmulator` or ``sandbox-runtime ags emulator``; where it differs from
the real service is written down in ``docs/ags-emulator.md``.

Importing this package is cheap: :class:`AgsEmulator` (which needs ``httpx``) loads on first use,
and the ``envd`` subpackage needs nothing but the standard library.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .server import AgsEmulator

__all__ = ["AgsEmulator"]


def __getattr__(name: str) -> Any:
    if name == "AgsEmulator":
        from .server import AgsEmulator

        return AgsEmulator
    raise AttributeError(name)
