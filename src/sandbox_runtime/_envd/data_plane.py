"""The file and command methods of a backend whose sandboxes speak envd (``ags``, ``e2b``).

Both backends reach their sandboxes the same way once started: every command and file call
goes through one :class:`~sandbox_runtime._envd.commands.EnvdCommands`, which already holds
the wrapper, the deadlines and the error translation.  Backends may not import each other, so
the seven delegating methods live here, once, as a mixin placed before ``Backend`` in the
bases.
"""

from __future__ import annotations

from typing import BinaryIO

from sandbox_runtime._core.backend import ExecRequest
from sandbox_runtime._core.results import ExecResult

from .commands import EnvdCommands

__all__ = ["EnvdDataPlane"]


class EnvdDataPlane:
    """Commands and files through ``self._commands`` (set by the backend's ``__init__``)."""

    _commands: EnvdCommands

    def exec(self, request: ExecRequest) -> ExecResult:
        """Run one command under the wrapper, through envd."""
        return self._commands.exec(request)

    def write_file(self, path: str, data: bytes, mode: int = 0o644) -> None:
        """Upload through envd's ``/files``; a mode other than 0644 costs one ``chmod``."""
        self._commands.write_file(path, data, mode)

    def read_file_to(self, path: str, sink: BinaryIO) -> None:
        """Stream envd's ``/files`` answer into ``sink``."""
        self._commands.read_file_to(path, sink)

    def read_file(self, path: str) -> bytes:
        """Download through envd's ``/files``."""
        return self._commands.read_file(path)

    def exists(self, path: str) -> bool:
        """Envd's ``Stat``."""
        return self._commands.exists(path)

    def put_archive(self, data: bytes) -> None:
        """Upload the tar through ``/files`` and extract it at ``/`` with ``tar``."""
        self._commands.put_archive(data)

    def get_archive(self, path: str) -> bytes:
        """``tar -c`` of the path, read from the command's output as exact bytes."""
        return self._commands.get_archive(path)
