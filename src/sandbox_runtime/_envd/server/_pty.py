"""Pseudo-terminals for envd's PTY processes (``Start`` with a ``pty``), standard library only.

envd starts such a process with ``creack/pty``: a new session whose controlling terminal,
stdin, stdout and stderr are the slave side of a fresh pty of the requested size; envd keeps
the master, reads the output from it (``pty`` data events) and writes ``pty`` input to it.
``Update`` resizes it.  Python's ``subprocess`` cannot make the slave the controlling
terminal without a ``preexec_fn`` (unsafe in envd's threaded process), so the child is started
through a two-line Python helper that does ``TIOCSCTTY`` and then ``exec``s the command.
"""

from __future__ import annotations

import fcntl
import os
import pty
import struct
import sys
import termios
from typing import Any

from ._connect import ConnectError

__all__ = ["open_pty", "pty_argv", "resize"]

_SET_CONTROLLING_TTY = (
    "import fcntl, os, sys, termios\n"
    "fcntl.ioctl(0, termios.TIOCSCTTY, 0)\n"
    "os.execvp(sys.argv[1], sys.argv[1:])\n"
)


def _size(spec: dict[str, Any]) -> tuple[int, int]:
    size = spec.get("size") or {}
    return int(size.get("rows") or 0), int(size.get("cols") or 0)


def resize(fd: int, spec: dict[str, Any]) -> None:
    """Set the window size of the pty behind ``fd`` from a ``PTY`` message."""
    rows, cols = _size(spec)
    try:
        fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    except OSError as exc:
        raise ConnectError("internal", f"error resizing tty: {exc}") from exc


def open_pty(spec: dict[str, Any]) -> tuple[int, int]:
    """A new ``(master, slave)`` pair of the size a ``PTY`` message asks for."""
    master, slave = pty.openpty()
    try:
        resize(slave, spec)
    except ConnectError:
        os.close(master)
        os.close(slave)
        raise
    os.set_blocking(master, False)
    return master, slave


def pty_argv(argv: list[str]) -> list[str]:
    """``argv`` run with the pty on stdin as its controlling terminal."""
    return [sys.executable, "-E", "-s", "-c", _SET_CONTROLLING_TTY, *argv]
