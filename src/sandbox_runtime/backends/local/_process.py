"""Run a host process with a deadline, bounded output and a process-group kill.

``subprocess.run(timeout=...)`` kills only the direct child, waits for grandchildren that
still hold the pipes, and keeps unbounded output.  This runner starts the command as a new
session, reads both pipes in one thread with ``selectors`` into head/tail buffers, feeds
stdin without deadlocking, and on timeout SIGKILLs the whole process group.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence

from sandbox_runtime.backend_kit import (
    ExecResult,
    HeadTailBuffer,
)

__all__ = ["end_marked", "kill_marked", "run_process", "shared_writable_inodes"]

_READ_SIZE = 65536
# After the command exits, background children may still hold the pipes open; their
# output is not the command's, so we read what is already there and stop shortly after.
_DRAIN_AFTER_EXIT = 0.05
# kill_marked: at most this many scans of /proc, the n-th n * _KILL_PASS_GAP s after the last.
_KILL_PASSES = 5
_KILL_PASS_GAP = 0.005
# The flag of a kernel thread in /proc/<pid>/stat (include/linux/sched.h).
_PF_KTHREAD = 0x00200000


def run_process(
    argv: Sequence[str],
    *,
    cwd: str,
    env: Mapping[str, str],
    timeout: float | None,
    stdin: bytes | None,
    max_output_bytes: int,
    display: str,
    on_start: Callable[[int], None] | None = None,
    kill_marker: str | None = None,
    buffers: tuple[HeadTailBuffer, HeadTailBuffer] | None = None,
    pass_fds: Sequence[int] = (),
) -> ExecResult:
    """Run ``argv`` and return its result; see the module docstring for the rules.

    ``kill_marker`` is a ``NAME=value`` entry of ``env`` unique to this command: on timeout,
    every process whose environment carries it is killed too, so children that left the
    process group (``setsid``, daemons) do not outlive the command.  ``pass_fds`` are open
    descriptors the process inherits (every other one is closed).
    """
    began = time.monotonic()
    deadline = None if timeout is None else began + timeout
    process = subprocess.Popen(
        list(argv),
        cwd=cwd,
        env=dict(env),
        stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        close_fds=True,
        pass_fds=tuple(pass_fds),
    )
    if on_start is not None:
        on_start(process.pid)
    stdout, stderr = buffers or (HeadTailBuffer(max_output_bytes), HeadTailBuffer(max_output_bytes))
    timed_out = False
    try:
        timed_out = _pump(process, stdin, stdout, stderr, deadline)
    finally:
        if timed_out:
            _kill_group(process.pid)
            if kill_marker is not None:
                kill_marked(kill_marker)
        for stream in (process.stdout, process.stderr, process.stdin):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
        returncode = process.wait()
    # A negative return code is a signal: report it the way a shell does.
    exit_code = 128 - returncode if returncode < 0 else returncode
    return ExecResult.from_buffers(
        display, exit_code, stdout, stderr, began=began, timed_out=timed_out
    )


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def kill_marked(marker: str) -> int:
    """SIGKILL every process (and the group it leads) whose environment holds ``marker``.

    Reads ``/proc/<pid>/environ``, which only the processes' owner (or root) can read, so it
    never reaches another user's processes.  Returns how many were found.

    As the in-sandbox kill script does (``kill_group_script``), every carrier is
    stopped before any is killed: killing in ``/proc`` order let ``sh -c 'sleep 4; echo late
    > f'`` write ``f`` when its sleep's pid came first.  And one scan is not enough: a
    process in the middle of ``execve`` (a ``setsid sh -c ...`` just forked) reads an empty
    environment until the new program's stack is set up.  So scans repeat, a few
    milliseconds apart, while the last one found a carrier or saw such a process.
    """
    carriers = stop_marked(marker)
    for pid in carriers:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    return len(carriers)


def end_marked(marker: str, wait_s: float = 2.0) -> None:
    """:func:`kill_marked`, then wait (up to ``wait_s``) until those processes are dead.

    A rollback that compares the tree must not race a write still under way in a process
    being killed: once its ``/proc`` entry is gone or a zombie, it writes nothing more.
    """
    carriers = stop_marked(marker)
    for pid in carriers:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + wait_s
    alive = set(carriers)
    while alive and time.monotonic() < deadline:
        alive = {pid for pid in alive if _running(pid)}
        if alive:
            time.sleep(0.002)


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            state = handle.read().rsplit(b")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in (b"Z", b"X")


def shared_writable_inodes(marker: str) -> set[int]:
    """Inodes that processes carrying ``marker`` map shared and writable (``/proc/*/maps``).

    A write through such a mapping to a page already dirty moves no ctime, so a checkpoint
    must not trust the stamps of these files (``_tree_copy``).
    """
    wanted = marker.encode()
    inodes: set[int] = set()
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as handle:
                if wanted not in handle.read().split(b"\0"):
                    continue
            with open(f"/proc/{name}/maps", "rb") as handle:
                for line in handle:
                    fields = line.split(maxsplit=5)
                    if len(fields) > 4 and fields[1][1:2] == b"w" and fields[1][3:4] == b"s":
                        inodes.add(int(fields[4]))
        except (OSError, ValueError):
            continue
    inodes.discard(0)
    return inodes


def stop_marked(marker: str) -> set[int]:
    """SIGSTOP every process whose environment holds ``marker`` (a local sandbox's pause).

    The same repeated scans as :func:`kill_marked`, so a process caught mid-``execve`` or
    forked during the scan is stopped too.  Returns the stopped pids, for :func:`continue_pids`.
    """
    wanted = marker.encode()
    carriers: set[int] = set()
    for attempt in range(_KILL_PASSES):
        stopped, unsure = _stop_marked(wanted, carriers)
        if not (stopped or unsure):
            break
        time.sleep(_KILL_PASS_GAP * (attempt + 1))
    return carriers


def continue_marked(marker: str, also: set[int]) -> None:
    """SIGCONT the pids in ``also`` and every process still carrying ``marker`` (resume)."""
    wanted = marker.encode()
    pids = set(also)
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/environ", "rb") as handle:
                    if wanted in handle.read().split(b"\0"):
                        pids.add(int(name))
            except OSError:
                continue
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGCONT)


def _stop_marked(wanted: bytes, carriers: set[int]) -> tuple[int, int]:
    """One scan: SIGSTOP each carrier not yet in ``carriers`` and add it there.

    Returns how many it stopped, and how many processes it could not judge (mid-``execve``).
    """
    stopped = unsure = 0
    own = os.getpid()
    for name in os.listdir("/proc"):
        if not name.isdigit() or (pid := int(name)) in carriers or pid == own:
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as handle:
                environ = handle.read()
        except OSError:
            continue
        if not environ:
            unsure += _in_exec(pid)
        elif wanted in environ.split(b"\0"):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGSTOP)
            carriers.add(pid)
            stopped += 1
    return stopped, unsure


def _in_exec(pid: int) -> bool:
    """Whether a process whose environment reads empty may be a user process mid-``execve``.

    Kernel threads and zombies always read empty; anything else might be between programs.
    """
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            fields = handle.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return False
    state, flags = fields[0], int(fields[6])
    return state not in (b"Z", b"X") and not flags & _PF_KTHREAD


def _open_pidfd(pid: int) -> int | None:
    """A descriptor that becomes readable when ``pid`` exits (Linux >= 5.3), or None."""
    pidfd_open = getattr(os, "pidfd_open", None)
    if pidfd_open is None:
        return None
    try:
        return int(pidfd_open(pid))
    except OSError:
        return None


def _pump(
    process: subprocess.Popen[bytes],
    stdin: bytes | None,
    stdout: HeadTailBuffer,
    stderr: HeadTailBuffer,
    deadline: float | None,
) -> bool:
    """Move bytes until the command has exited and its pipes are drained; True on deadline.

    The command's exit wakes the selector through a pidfd where the kernel has them, so
    neither a finished command nor its caller waits on a polling interval; elsewhere the
    loop checks the process every 50 ms.
    """
    pump = _Pump(process, stdin, stdout, stderr, deadline)
    try:
        return pump.run()
    finally:
        pump.close()


class _Pump:
    """One command's I/O loop and the state its steps share: pipes, stdin left, exit time."""

    __slots__ = (
        "deadline",
        "exited_at",
        "pending",
        "pidfd",
        "process",
        "selector",
        "sinks",
        "stdin_fd",
    )

    def __init__(
        self,
        process: subprocess.Popen[bytes],
        stdin: bytes | None,
        stdout: HeadTailBuffer,
        stderr: HeadTailBuffer,
        deadline: float | None,
    ) -> None:
        assert process.stdout is not None
        assert process.stderr is not None
        self.process = process
        self.deadline = deadline
        self.selector = selectors.DefaultSelector()
        self.sinks = {process.stdout.fileno(): stdout, process.stderr.fileno(): stderr}
        for fd in self.sinks:
            os.set_blocking(fd, False)
            self.selector.register(fd, selectors.EVENT_READ)
        self.pidfd = _open_pidfd(process.pid)
        if self.pidfd is not None:
            self.selector.register(self.pidfd, selectors.EVENT_READ)
        self.pending = memoryview(stdin) if stdin is not None else None
        self.stdin_fd = -1
        if process.stdin is not None:
            self.stdin_fd = process.stdin.fileno()
            os.set_blocking(self.stdin_fd, False)
            if self.pending:
                self.selector.register(self.stdin_fd, selectors.EVENT_WRITE)
            else:
                process.stdin.close()
        self.exited_at: float | None = None

    def close(self) -> None:
        """Release the selector and the pidfd."""
        self.selector.close()
        if self.pidfd is not None:
            os.close(self.pidfd)

    def run(self) -> bool:
        """The loop: wait for the pipes, the pidfd or the deadline; True on deadline."""
        while True:
            now = time.monotonic()
            if self.exited_at is None and self.pidfd is None and self.process.poll() is not None:
                self.exited_at = now
            if self.exited_at is not None and self._drained(now):
                return False
            if self.deadline is not None and now >= self.deadline:
                return True
            for key, _ in self.selector.select(self._timeout(now)):
                self._ready(key.fd)
            # Pipes closed (the command closed them, or exited): wait for the status.
            if not self.sinks and self.exited_at is None and self.pidfd is None and self._reap():
                return True

    def _drained(self, now: float) -> bool:
        """After the exit: whether the pipes are done (closed, or given their grace)."""
        assert self.exited_at is not None
        if not self.sinks:
            return True
        if now - self.exited_at > _DRAIN_AFTER_EXIT:
            _read_available(self.sinks)
            return True
        return False

    def _timeout(self, now: float) -> float | None:
        """How long the selector may wait: the drain's grace, a poll, or the deadline."""
        wait: float | None = _DRAIN_AFTER_EXIT if self.exited_at is not None else None
        if self.pidfd is None and self.exited_at is None:
            wait = 0.05
        if self.deadline is not None:
            left = self.deadline - now
            wait = max(left, 0.0) if wait is None else min(wait, left)
        return wait

    def _ready(self, fd: int) -> None:
        """Handle one ready descriptor: the exit, stdin's room, or output."""
        if fd == self.pidfd:
            self.selector.unregister(fd)
            self.exited_at = time.monotonic()
            return
        if fd == self.stdin_fd:
            self._feed()
            return
        try:
            chunk = os.read(fd, _READ_SIZE)
        except BlockingIOError:
            return
        if chunk:
            self.sinks[fd].write(chunk)
        else:
            self.selector.unregister(fd)
            del self.sinks[fd]

    def _feed(self) -> None:
        """Write the next piece of stdin; close the pipe once it is all written."""
        pending = self.pending
        assert pending is not None
        assert self.process.stdin is not None
        try:
            pending = pending[os.write(self.stdin_fd, pending[:_READ_SIZE]) :]
        except BlockingIOError:
            return
        except BrokenPipeError:  # the command stopped reading: not an error
            pending = pending[len(pending) :]
        self.pending = pending
        if not pending:
            self.selector.unregister(self.stdin_fd)
            self.process.stdin.close()

    def _reap(self) -> bool:
        """Wait for the exit status until the deadline; True when the deadline came first."""
        remaining = None if self.deadline is None else max(self.deadline - time.monotonic(), 0.0)
        try:
            self.process.wait(timeout=remaining)
        except subprocess.TimeoutExpired:
            return True
        self.exited_at = time.monotonic()
        return False


def _read_available(sinks: dict[int, HeadTailBuffer]) -> None:
    """Read whatever is already buffered in the pipes, without waiting for more."""
    for fd, sink in list(sinks.items()):
        while True:
            try:
                chunk = os.read(fd, _READ_SIZE)
            except (BlockingIOError, OSError):
                break
            if not chunk:
                break
            sink.write(chunk)
