"""The ``local`` backend's options: where sandboxes live, isolation, network, environment."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field

from sandbox_runtime.backend_kit import BackendOptions

__all__ = ["LocalOptions"]


class LocalOptions(BackendOptions):
    """Options of the ``local`` backend."""

    base_dir: Path | None = None
    """Where sandbox directories are created; default ``$TMPDIR/sandbox-runtime-<uid>``."""
    isolation: Literal["none", "namespace"] | None = None
    """``none``: plain host processes; ``namespace``: bubblewrap namespaces (see module doc).

    Unset (the default): ``namespace`` where bubblewrap works here (probed once per process),
    else ``none`` with a one-line warning.  Asked for explicitly, ``namespace`` never falls back.
    """
    network: bool = True
    """Allow network access; ``False`` needs namespace isolation."""
    inherit_env: bool = True
    """Start commands from the host's environment (then the sandbox's ``env`` on top)."""
    own_python: bool = True
    """Give each sandbox its own Python environment for installs (see ``_python_env``)."""
    bwrap_path: str = Field(default="bwrap")
    """The bubblewrap binary used by ``isolation="namespace"``."""
