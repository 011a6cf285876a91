"""bubblewrap for the ``local`` backend: probe, command line, and a run that retries its setup.

bubblewrap binds the host's top-level directories read-only and recursively.  That bind races
with mounts that come and go under them: a Docker engine on the same host starting or removing
containers mounts and unmounts ``/var/lib/docker/overlay2/.../merged``, and bubblewrap then
fails to remount one read-only (``Can't bind mount /oldroot/var on /newroot/var``, about 1 in
400 starts while containers churn).  Nothing of the command has run then, so the start is
retried; the command's exit code is told apart from bubblewrap's by ``--json-status-fd``,
which carries an ``exit-code`` only once bubblewrap has handed over to the command.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import ClassVar

from sandbox_runtime.backend_kit import (
    ExecResult,
)
from sandbox_runtime.errors import BackendError

__all__ = ["SETUP_TRIES", "WRITABLE_INSIDE_HOST_ENTRIES", "Bubblewrap"]

logger = logging.getLogger("sandbox_runtime.local")

#: Starts of one command tried while bubblewrap fails to set its sandbox up.
SETUP_TRIES = 4
#: Directories inside the host's read-only entries that are the sandbox's own, writable, as
#: in a container: tools write there (R2E-Gym's file editor keeps its undo history in
#: ``/var/tmp/editor_state.json``). Each is a directory of the root bound over the host's.
WRITABLE_INSIDE_HOST_ENTRIES = ("var/tmp",)
#: Seconds before the second start; it grows linearly with each further one.
_SETUP_BACKOFF = 0.02


class Bubblewrap:
    """Builds bubblewrap command lines and remembers whether bubblewrap works here."""

    _probe_lock = threading.Lock()
    # binary -> (why it cannot be used or "", whether it reports its command's exit status)
    _probed: ClassVar[dict[str, tuple[str, bool]]] = {}

    @classmethod
    def problem(cls, binary: str) -> str:
        """Empty if ``binary`` can create namespaces here, else why not."""
        return cls._probe_once(binary)[0]

    @classmethod
    def reports_status(cls, binary: str) -> bool:
        """Whether ``binary`` reports its command's exit code on ``--json-status-fd``.

        Current releases do (0.8 here); with one that does not, commands run without the
        setup retry.
        """
        return cls._probe_once(binary)[1]

    @classmethod
    def _probe_once(cls, binary: str) -> tuple[str, bool]:
        with cls._probe_lock:
            if binary not in cls._probed:
                cls._probed[binary] = cls._probe(binary)
            return cls._probed[binary]

    @staticmethod
    def _probe(binary: str) -> tuple[str, bool]:
        path = shutil.which(binary)
        if path is None:
            missing = "not found (install bubblewrap, e.g. apt-get install bubblewrap)"
            return f"{binary!r} {missing}", False
        argv = [path, "--ro-bind", "/", "/", "--unshare-pid", "--die-with-parent", "true"]

        def start(argv: list[str], pass_fds: tuple[int, ...]) -> ExecResult:
            done = subprocess.run(
                argv, capture_output=True, timeout=10, check=False, pass_fds=pass_fds
            )
            return ExecResult("true", done.returncode, stderr_bytes=done.stderr)

        try:
            # The probe's own bind races like any start; a lost race must not be remembered
            # as "bubblewrap cannot work here" for the life of the process.
            for attempt in range(1, SETUP_TRIES + 1):
                result, ran = Bubblewrap._start_once(argv, start)
                if result.exit_code == 0:
                    return "", ran
                time.sleep(_SETUP_BACKOFF * attempt)
            plain = start(argv, ())  # a bubblewrap that does not know --json-status-fd
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"bubblewrap failed to run: {exc}", False
        if plain.exit_code != 0:
            reason = plain.stderr_bytes.decode(errors="replace").strip()
            return f"bubblewrap cannot create namespaces here: {reason}", False
        return "", False

    @staticmethod
    def host_entries(root: Path) -> list[tuple[str, str | None]]:
        """The host's top-level entries the sandbox lacks: ``(name, link target or None)``.

        Makes an empty stand-in for each in ``root`` (a directory, or the same symlink), the
        mount point of the read-only bind that shows the host's entry there.
        """
        own = {entry.name for entry in os.scandir(root)}
        entries: list[tuple[str, str | None]] = []
        for entry in sorted(os.scandir("/"), key=lambda e: e.name):
            if entry.name in own or entry.name in ("proc", "dev", "tmp"):
                continue
            if entry.is_symlink():
                target = os.readlink(entry.path)
                os.symlink(target, root / entry.name)
                entries.append((entry.name, target))
            elif entry.is_dir():
                (root / entry.name).mkdir()
                entries.append((entry.name, None))
                for inner in WRITABLE_INSIDE_HOST_ENTRIES:
                    top, _, rest = inner.partition("/")
                    if top == entry.name and os.path.isdir(f"/{inner}"):
                        own_dir = root / top / rest
                        own_dir.mkdir(parents=True)
                        own_dir.chmod(0o1777)
        return entries

    @staticmethod
    def argv(
        binary: str,
        root: Path,
        entries: list[tuple[str, str | None]],
        cwd: str,
        network: bool,
    ) -> list[str]:
        args = [binary, "--die-with-parent", "--unshare-pid", "--unshare-ipc", "--unshare-uts"]
        if not network:
            args.append("--unshare-net")
        args += ["--bind", str(root), "/"]
        for name, target in entries:
            if target is None:
                args += ["--ro-bind", f"/{name}", f"/{name}"]
        for inner in WRITABLE_INSIDE_HOST_ENTRIES:
            if (root / inner).is_dir() and (inner.partition("/")[0], None) in entries:
                args += ["--bind", str(root / inner), f"/{inner}"]
        args += ["--dev", "/dev", "--proc", "/proc", "--chdir", cwd, "--"]
        return args

    @classmethod
    def run(
        cls,
        argv: Sequence[str],
        start: Callable[[list[str], tuple[int, ...]], ExecResult],
        *,
        cancelled: Callable[[], bool] = lambda: False,
    ) -> ExecResult:
        """Run the bubblewrap command line ``argv`` through ``start(argv, pass_fds)``.

        A start in which bubblewrap could not set the sandbox up ran nothing of the command,
        so it is tried again, up to ``SETUP_TRIES`` times; then :class:`BackendError` says
        why, never an exit code the command did not give.  Only bubblewrap's own exit (1,
        with no report) is retried: a start that was killed (a timeout, ``kill()``) is
        returned as it is, and so is one whose command was ``cancelled()`` meanwhile.
        Output callbacks see bubblewrap's own message of a failed start.
        """
        if not cls.reports_status(argv[0]):
            return start(list(argv), ())
        for attempt in range(1, SETUP_TRIES + 1):
            result, ran = cls._start_once(argv, start)
            if ran or result.timed_out or result.exit_code != 1:
                return result
            reason = result.stderr_bytes.decode(errors="replace").strip()[-300:]
            if attempt == SETUP_TRIES:
                raise BackendError(
                    f"bubblewrap could not set the sandbox up in {attempt} tries: {reason}"
                )
            logger.warning("bubblewrap could not set the sandbox up, trying again: %s", reason)
            time.sleep(_SETUP_BACKOFF * attempt)
            if cancelled():
                return result
        raise AssertionError("unreachable")

    @staticmethod
    def _start_once(
        argv: Sequence[str], start: Callable[[list[str], tuple[int, ...]], ExecResult]
    ) -> tuple[ExecResult, bool]:
        """One start with a status pipe: the result, and whether the command itself ran."""
        status_read, status_write = os.pipe()
        try:
            with_status = [argv[0], "--json-status-fd", str(status_write), *argv[1:]]
            result = start(with_status, (status_write,))
        finally:
            os.close(status_write)
            status = _drain(status_read)
        return result, _command_ran(status)


def _drain(fd: int) -> bytes:
    """Everything already written to the pipe ``fd``, which is then closed.

    The writer (bubblewrap's monitor) has exited when this runs, so its reports are all in
    the pipe; reading without blocking keeps a copy of the write end that a concurrent
    ``fork`` briefly holds from stalling the caller.
    """
    chunks: list[bytes] = []
    try:
        os.set_blocking(fd, False)
        with contextlib.suppress(BlockingIOError):
            while chunk := os.read(fd, 65536):
                chunks.append(chunk)
    finally:
        os.close(fd)
    return b"".join(chunks)


def _command_ran(status: bytes) -> bool:
    """Whether bubblewrap's JSON status reports say it handed over to the command."""
    for line in status.splitlines():
        with contextlib.suppress(ValueError):
            report = json.loads(line)
            if isinstance(report, dict) and "exit-code" in report:
                return True
    return False
