"""Output as it arrives, and commands that run in the background.

Every backend captures a command's output through the buffers of its
:class:`~sandbox_runtime._core.request.ExecRequest`; a request with ``on_output`` gets each chunk
from the thread that reads it, so streaming costs nothing extra and behaves the same on every
backend. This module turns those byte chunks into text callbacks (UTF-8 decoded across chunk
boundaries, undecodable bytes replaced, as ``ExecResult.stdout`` does) and runs a command in
the background behind a :class:`CommandHandle` with ``wait()`` and ``kill()``.

A background command carries a token of its own in its environment; ``kill()`` runs, in the
sandbox, the same ``/proc`` scan the backends use on a timeout, so it reaches every process
the command started (``setsid`` ones too) on any backend, and the command's ``exec`` returns
with the output so far.
"""

from __future__ import annotations

import codecs
import logging
import threading
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Protocol

from sandbox_runtime._core import shell as _shell
from sandbox_runtime._core.results import ExecResult

__all__ = [
    "BACKGROUND_VAR",
    "BackgroundSandbox",
    "CommandHandle",
    "OutputListener",
    "TextListener",
    "new_background_token",
    "output_listener",
]

logger = logging.getLogger("sandbox_runtime.streaming")

#: The environment variable that marks a background command's processes for ``kill()``.
BACKGROUND_VAR = "SANDBOX_RUNTIME_BACKGROUND"

TextListener = Callable[[str], None]


class _Decoder:
    """One stream's text callback over incoming byte chunks."""

    def __init__(self, callback: TextListener) -> None:
        self._callback = callback
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._failed = False

    def feed(self, data: bytes, *, final: bool = False) -> None:
        text = self._decoder.decode(data, final=final)
        if text and not self._failed:
            try:
                self._callback(text)
            except Exception:
                # The command must not die of its observer: say so once and stop calling.
                self._failed = True
                logger.exception("an output callback raised; it gets no more output")


class OutputListener:
    """The ``on_output`` of a request, calling ``on_stdout`` / ``on_stderr`` with text."""

    def __init__(self, on_stdout: TextListener | None, on_stderr: TextListener | None) -> None:
        self._streams = {
            name: _Decoder(callback)
            for name, callback in (("stdout", on_stdout), ("stderr", on_stderr))
            if callback is not None
        }

    def __call__(self, stream: str, data: bytes) -> None:
        decoder = self._streams.get(stream)
        if decoder is not None:
            decoder.feed(data)

    def close(self) -> None:
        """Deliver what an incomplete UTF-8 sequence held back at the end."""
        for decoder in self._streams.values():
            decoder.feed(b"", final=True)


def output_listener(
    on_stdout: TextListener | None, on_stderr: TextListener | None
) -> OutputListener | None:
    """The request's ``on_output`` for these callbacks, or ``None`` when there are none."""
    if on_stdout is None and on_stderr is None:
        return None
    return OutputListener(on_stdout, on_stderr)


def new_background_token() -> str:
    """A unique marker for one background command's processes."""
    return f"sandbox-runtime-bg-{uuid.uuid4().hex}"


class _MarkedKiller(Protocol):
    """The one backend method a kill uses (``Backend.kill_marked``)."""

    def kill_marked(self, marker: str) -> bool: ...


class BackgroundSandbox(Protocol):
    """What :meth:`CommandHandle.kill` uses of its sandbox (a ``SandboxRuntime``).

    A Protocol rather than the class so that this module, which ``runtime.py`` imports,
    imports nothing of it.
    """

    @property
    def backend(self) -> _MarkedKiller: ...

    def exec(self, command: Sequence[str], *, timeout: float | None) -> ExecResult: ...


class CommandHandle:
    """A command running in the background (:meth:`SandboxRuntime.exec_background`)."""

    def __init__(self, sandbox: BackgroundSandbox, token: str, display: str) -> None:
        self._sandbox = sandbox
        self._token = token
        self.command = display
        self._future: Future[ExecResult] = Future()
        self._killed = threading.Event()

    def start(self, run: Callable[[], ExecResult]) -> CommandHandle:
        """Run ``run`` (the command's ``exec``) on a thread of its own; returns ``self``."""
        thread = threading.Thread(
            target=self._body, args=(run,), name="sandbox-runtime-background", daemon=True
        )
        thread.start()
        return self

    def _body(self, run: Callable[[], ExecResult]) -> None:
        if not self._future.set_running_or_notify_cancel():
            return
        try:
            self._future.set_result(run())
        except BaseException as exc:
            self._future.set_exception(exc)

    @property
    def done(self) -> bool:
        """True once the command has ended (its result or error is ready)."""
        return self._future.done()

    def wait(self, timeout: float | None = None) -> ExecResult:
        """The command's result, waiting up to ``timeout`` seconds (``TimeoutError`` then).

        Raises what the command's ``exec`` raised (a gone sandbox, say).
        """
        return self._future.result(timeout)

    def kill(self, *, wait: float | None = 30.0) -> ExecResult | None:
        """SIGKILL the command and everything it started; its result when it ends in ``wait``.

        Harmless once the command has ended (the result is returned).
        """
        if not self._future.done():
            self._killed.set()
            if not self._sandbox.backend.kill_marked(f"{BACKGROUND_VAR}={self._token}"):
                self._sandbox.exec(
                    _shell.kill_group_script(self._token, var=BACKGROUND_VAR), timeout=30
                )
        try:
            return self._future.result(wait)
        except TimeoutError:
            return None

    @property
    def killed(self) -> bool:
        """True when :meth:`kill` was called before the command ended."""
        return self._killed.is_set()

    def __repr__(self) -> str:
        state = "done" if self.done else "running"
        return f"CommandHandle({self.command[:60]!r}, {state})"
