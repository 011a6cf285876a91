"""One command as a backend receives it: :class:`ExecRequest`.

Its own module, below ``backend.py``, so that what the backend's default methods call
(``transfer.py`` builds requests of its own) can name it without importing ``backend.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from sandbox_runtime._core.output import HeadTailBuffer

__all__ = ["ExecRequest"]


@dataclass(frozen=True, slots=True)
class ExecRequest:
    """One command, fully resolved by the runtime before it reaches a backend.

    ``command`` is either a shell string (run by ``bash -c`` where bash exists, else
    ``sh -c``) or an argument vector run without a shell.  ``cwd`` is absolute, ``env`` already
    merges the sandbox's and the call's variables, and ``timeout`` is ``None`` for no limit.
    """

    command: str | tuple[str, ...]
    cwd: str
    env: dict[str, str] = field(default_factory=dict)
    timeout: float | None = None
    stdin: bytes | None = None
    max_output_bytes: int = 8 * 1024 * 1024
    on_output: Callable[[str, bytes], None] | None = field(default=None, compare=False)
    """Streaming: called with ``("stdout" | "stderr", chunk)`` as output arrives, from the
    thread that reads it; backends get it for free by capturing through
    :meth:`output_buffers`."""

    def output_buffers(self) -> tuple[HeadTailBuffer, HeadTailBuffer]:
        """The capped stdout and stderr buffers of this command, streaming when asked."""
        listener = self.on_output
        if listener is None:
            return HeadTailBuffer(self.max_output_bytes), HeadTailBuffer(self.max_output_bytes)
        return (
            HeadTailBuffer(self.max_output_bytes, lambda data: listener("stdout", data)),
            HeadTailBuffer(self.max_output_bytes, lambda data: listener("stderr", data)),
        )

    @property
    def display(self) -> str:
        """The command as a person would type it, for results and logs."""
        if isinstance(self.command, str):
            return self.command
        import shlex

        return shlex.join(self.command)
