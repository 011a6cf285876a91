"""The ``local`` backend: a directory per sandbox and real host processes, no daemon needed.

Modules: ``_options`` (:class:`LocalOptions`), ``_process`` (one host process with a
deadline, bounded output and a process-group kill), ``_bubblewrap`` (namespace isolation) and
``_backend`` (:class:`LocalBackend`, with the lifetime watchdog).
"""

from __future__ import annotations

from ._backend import LocalBackend
from ._options import LocalOptions

__all__ = ["LocalBackend", "LocalOptions"]
