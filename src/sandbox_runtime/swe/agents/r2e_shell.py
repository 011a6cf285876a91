r"""How R2E-Gym's ``execute_bash`` runs a command and reads what it printed.

R2E-Gym 0d94c4e's script hands the command to Python's ``subprocess`` with ``shell=True``,
so it runs under ``/bin/sh`` (dash on Debian images: no brace expansion, no ``[[ ]]``, no
``set -o pipefail``, ``echo -e`` prints ``-e``), and reads both streams as text: UTF-8,
every ``\r\n`` and lone ``\r`` made ``\n``.  Output that is not UTF-8 is not replaced
there: the script dies with a ``UnicodeDecodeError`` (exit status 1) and the model sees
that error instead of the output.  :func:`shell_line` and :func:`decode_streams` give the
built-in ``bash`` tool the same shell and the same reading, so a policy trained on R2E-Gym
meets the environment it was trained in (``tests/integrations/test_r2egym_parity.py``).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

__all__ = ["SHELL", "Decoded", "decode_streams", "shell_line", "undecodable_output"]

#: The shell R2E-Gym's ``subprocess.run(..., shell=True)`` starts.
SHELL = "/bin/sh"


def shell_line(command: str) -> str:
    """The line that runs ``command`` under :data:`SHELL`, as ``shell=True`` does."""
    return f"{SHELL} -c {shlex.quote(command)}"


@dataclass(frozen=True)
class Decoded:
    """A command's streams as R2E-Gym's script reads them, or why it could not."""

    stdout: str = ""
    stderr: str = ""
    error: str | None = None
    """The ``UnicodeDecodeError`` text where a stream is not UTF-8 (the script died)."""


def _text(data: bytes) -> str:
    return data.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")


def decode_streams(stdout: bytes, stderr: bytes) -> Decoded:
    """Both streams decoded as ``text=True`` decodes them: standard output first."""
    try:
        return Decoded(_text(stdout), _text(stderr))
    except UnicodeDecodeError as exc:
        return Decoded(error=f"UnicodeDecodeError: {exc}")


def undecodable_output(error: str) -> str:
    """What the model reads where the script died decoding the output (exit status 1).

    R2E-Gym's observation is the interpreter's traceback, whose frames name files and line
    numbers of the image's Python; this keeps its first line and the error, which say
    what happened, and one line in place of the frames.
    """
    return (
        "Traceback (most recent call last):\n"
        "  (execute_bash could not read the command's output as UTF-8)\n"
        f"{error}\n"
    )
