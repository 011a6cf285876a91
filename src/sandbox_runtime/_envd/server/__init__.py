"""An emulation of envd, the daemon that runs inside every E2B and AGS sandbox.

It speaks envd's wire protocol (``/health``, ``/files``, ``process.Process`` and
``filesystem.Filesystem`` over Connect+JSON) and runs commands as ordinary child processes.
It imports nothing but the standard library and only uses relative imports, so this
directory can be copied into any container that has ``python3`` and started there::

    python3 -m sandbox_runtime._envd.server --port 49983                 # in this package
    PYTHONPATH=/opt/x python3 -m srt_envd --port 49983              # copied as /opt/x/srt_envd

The AGS emulator starts one inside every instance it runs.  Differences from the real envd
are listed in ``docs/ags-emulator.md``.
"""

from .app import ENVD_VERSION, EnvdApp

__all__ = ["ENVD_VERSION", "EnvdApp"]
