"""The ``local`` backend: a directory per sandbox and real host processes, no daemon needed.

Modules: ``_backend`` (:class:`LocalBackend`, :class:`LocalOptions`, bubblewrap isolation and
the lifetime watchdog) and ``_process`` (one host process with a deadline, bounded output and
a process-group kill).
"""

from __future__ import annotations

from ._backend import LocalBackend, LocalOptions

__all__ = ["LocalBackend", "LocalOptions"]
