"""The ``ags`` backend: sandboxes as Tencent Cloud Agent Sandbox (AGS) instances.

Registered as the ``ags`` entry point; needs ``pip install 'sandbox-runtime[ags]'``.
See :mod:`sandbox_runtime.backends.ags.backend` for how it works and ``docs/ags-emulator.md``
for its options and the local emulator it is tested against.
"""

from ._options import AgsOptions
from .backend import AgsBackend

__all__ = ["AgsBackend", "AgsOptions"]
