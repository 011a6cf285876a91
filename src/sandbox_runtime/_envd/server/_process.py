"""Processes as envd runs them: real child processes whose output is fanned out as events.

Behaviour follows envd's process service where a client can see it:

* the command runs through ``/bin/sh -c 'exec "$@"'`` (envd wraps it in a shell too), so a
  missing program is exit 127 from the shell rather than a failed start;
* the process runs as the request's user (envd's default user unless one is given), whose
  ``HOME``, ``USER`` and ``LOGNAME`` it gets; the environment is ``PATH``, those, the
  sandbox's default variables, then the request's ``envs``;
* the child stays in envd's process group; ``SendSignal`` signals that pid only;
* a missing ``cwd`` fails the call with ``invalid_argument`` before anything runs;
* ``Connect-Timeout-Ms`` bounds the process: when it passes, the process is killed and the
  stream ends with ``deadline_exceeded``; a client that merely disconnects leaves it running;
* output arrives in chunks of at most 32 KiB; the end event carries the exit code, whether
  the process exited, and a Go-style status (``exit status 3``, ``signal: killed``).

Output pipes are read with the event loop's readers and exits are awaited on a thread per
process, so nothing here depends on asyncio's child watchers.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import os
import signal
import subprocess
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ._connect import ConnectError
from ._limits import with_callers_limit
from ._pty import open_pty, pty_argv, resize
from ._users import User

__all__ = ["Events", "ManagedProcess", "ProcessManager"]

CHUNK = 32 * 1024
# After the process exits, children it left behind may hold the pipes open forever; what
# they print later is not the process's output, so reading stops shortly after the exit.
_DRAIN_AFTER_EXIT = 0.05
#: How long a SIGKILL's answer waits for the process to be reaped (one in uninterruptible
#: sleep may take longer; the answer then comes without it).
_REAPED_WITHIN = 2.0
_READS_PER_WAKEUP = 8
_SIGNALS = {"SIGNAL_SIGKILL": signal.SIGKILL, "SIGNAL_SIGTERM": signal.SIGTERM, 9: 9, 15: 15}

Event = dict[str, Any]


def _watch_exit(
    loop: asyncio.AbstractEventLoop, popen: subprocess.Popen[bytes], exited: asyncio.Future[int]
) -> None:
    """Settle ``exited`` with the process's return code when it ends.

    Through a pidfd on the event loop where the kernel (5.3+) and Python (3.9+) have them,
    else on a thread blocked in ``wait``: starting a thread per command costs about as much
    as the rest of a short command's round trip.
    """
    try:
        pidfd = os.pidfd_open(popen.pid)  # type: ignore[attr-defined,unused-ignore]
    except (AttributeError, OSError):
        pidfd = -1
    if pidfd < 0:

        def wait_for_exit() -> None:
            code = popen.wait()
            loop.call_soon_threadsafe(_settle, exited, code)

        threading.Thread(target=wait_for_exit, name=f"envd-wait-{popen.pid}", daemon=True).start()
        return

    def ended() -> None:
        loop.remove_reader(pidfd)
        os.close(pidfd)
        _settle(exited, popen.wait())

    loop.add_reader(pidfd, ended)


def _settle(future: asyncio.Future[Any], value: Any) -> None:
    """Resolve ``future`` unless it already is (a callback may fire twice)."""
    if not future.done():
        future.set_result(value)


def _go_status(returncode: int) -> str:
    """The status text envd (Go's ``ProcessState.String``) gives for ``returncode``.

    Go names a signal by the C library's description, lower-cased (``signal: segmentation
    fault``); clients read the number back from it (a killed command has no exit code).
    """
    if returncode >= 0:
        return f"exit status {returncode}"
    try:
        description = signal.strsignal(-returncode)
    except ValueError:
        description = None
    if not description or description.startswith(("Unknown", "Real-time")):
        return f"signal: {-returncode}"
    return f"signal: {description.lower()}"


class Events:
    """One stream's events in order, then ``None``: a queue that waits without a task.

    ``asyncio.wait_for(queue.get(), t)`` makes a task and a timer per event; a stream waits
    for every event of every command, so it waits here on one future, woken by ``put``.
    """

    __slots__ = ("_items", "_waiter")

    def __init__(self) -> None:
        self._items: collections.deque[Event | None] = collections.deque()
        self._waiter: asyncio.Future[None] | None = None

    def put(self, event: Event | None) -> None:
        """Add an event (``None``: the last one) and wake the waiting stream."""
        self._items.append(event)
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def empty(self) -> bool:
        """Whether no event is waiting."""
        return not self._items

    def take(self) -> Event | None:
        """The next event; only when one is waiting (see :meth:`empty`)."""
        return self._items.popleft()

    async def wait(self, timeout: float | None) -> bool:
        """Wait until an event is waiting, at most ``timeout`` seconds; whether one is."""
        if self._items:
            return True
        loop = asyncio.get_running_loop()
        self._waiter = waiter = loop.create_future()
        timer = None if timeout is None else loop.call_later(timeout, _settle, waiter, None)
        try:
            await waiter
        finally:
            self._waiter = None
            if timer is not None:
                timer.cancel()
        return bool(self._items)


@dataclass
class ManagedProcess:
    """One started process and the streams listening to it."""

    pid: int
    config: dict[str, Any]
    tag: str | None
    popen: subprocess.Popen[bytes]
    tty: int | None = None
    """The pty master of a PTY process (its output and input), else None."""
    listeners: list[Events] = field(default_factory=list)
    end: Event | None = None
    stdin_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    finished: asyncio.Event = field(default_factory=asyncio.Event)
    exited: asyncio.Future[int] | None = None
    """Settled with the return code once the process is reaped (made when it starts)."""
    supervisor: asyncio.Task[None] | None = None
    """The task that follows the process to its end (held so it is not collected)."""

    def subscribe(self) -> Events:
        """A queue receiving every event from now on, then ``None``."""
        queue = Events()
        if self.finished.is_set():
            if self.end is not None:
                queue.put({"end": self.end})
            queue.put(None)
        else:
            self.listeners.append(queue)
        return queue

    def unsubscribe(self, queue: Events) -> None:
        """Stop delivering events to ``queue`` (its stream went away)."""
        with contextlib.suppress(ValueError):
            self.listeners.remove(queue)

    def publish(self, event: Event | None) -> None:
        """Deliver one event (``None`` closes the streams) to every listener."""
        for queue in list(self.listeners):
            queue.put(event)

    def info(self) -> dict[str, Any]:
        """The ``ProcessInfo`` message of ``List``."""
        info: dict[str, Any] = {"config": self.config, "pid": self.pid}
        if self.tag is not None:
            info["tag"] = self.tag
        return info


class ProcessManager:
    """The processes of one envd: start, find, feed, signal and list them."""

    def __init__(
        self,
        resolve_dir: Callable[[str, User], str],
        base_env: Callable[[], dict[str, str]],
        *,
        exec_like: bool = False,
    ) -> None:
        self._resolve_dir = resolve_dir
        self._base_env = base_env
        # True (the container backends' agent): a process gets the user's HOME/USER/LOGNAME
        # only when switching users, and its own session, as under ``docker exec``, so that
        # neither its environment nor a ``kill 0`` of its group reaches the agent itself.
        self._exec_like = exec_like
        self._processes: dict[int, ManagedProcess] = {}

    def list(self) -> list[dict[str, Any]]:
        """``ProcessInfo`` of every running process."""
        return [proc.info() for proc in self._processes.values()]

    def find(self, selector: dict[str, Any]) -> ManagedProcess:
        """The process a ``ProcessSelector`` names, or a ``not_found`` error."""
        if "pid" in selector:
            proc = self._processes.get(int(selector["pid"]))
            if proc is not None:
                return proc
            raise ConnectError("not_found", f"process with pid {selector['pid']} not found")
        if "tag" in selector:
            for proc in self._processes.values():
                if proc.tag == selector["tag"]:
                    return proc
            raise ConnectError("not_found", f"process with tag {selector['tag']} not found")
        raise ConnectError("invalid_argument", "process selector is empty")

    async def start(
        self, request: dict[str, Any], *, timeout: float | None, user: User
    ) -> tuple[ManagedProcess, Events]:
        """Start the process of a ``StartRequest`` as ``user``; returns it and its events."""
        config = dict(request.get("process") or {})
        cmd = config.get("cmd") or ""
        if not cmd:
            raise ConnectError("invalid_argument", "process cmd is empty")
        args = [str(arg) for arg in config.get("args") or []]
        cwd_text = config.get("cwd") or ""
        cwd = self._resolve_dir(cwd_text, user)
        if not os.path.isdir(cwd):
            raise ConnectError("invalid_argument", f"cwd '{cwd_text or cwd}' does not exist")
        env = self._base_env()
        if not self._exec_like or user.switch:
            env.update(user.env())
        env.update({str(k): str(v) for k, v in (config.get("envs") or {}).items()})
        want_stdin = request.get("stdin", True) is not False
        identity: dict[str, Any] = {}
        if user.switch:
            identity = {"user": user.uid, "group": user.gid, "extra_groups": user.groups()}
        # envd's own shell around the command; an exec-like agent runs the command itself
        # (its callers always name an interpreter), which saves a process per command.
        argv = [cmd, *args] if self._exec_like else ["/bin/sh", "-c", 'exec "$@"', "--", cmd, *args]
        argv = with_callers_limit(argv)
        tty: int | None = None
        streams: dict[str, Any] = {
            "stdin": subprocess.PIPE if want_stdin else subprocess.DEVNULL,
            "stdout": subprocess.PIPE,
            "stderr": subprocess.PIPE,
            "start_new_session": self._exec_like,
        }
        if request.get("pty"):
            tty, slave = open_pty(request["pty"])
            argv = pty_argv(argv)
            streams = {"stdin": slave, "stdout": slave, "stderr": slave, "start_new_session": True}
        try:
            popen = subprocess.Popen(argv, cwd=cwd, env=env, close_fds=True, **streams, **identity)
        except OSError as exc:
            if tty is not None:
                os.close(tty)
            raise ConnectError(
                "invalid_argument", f"error starting process '{cmd}': {exc}"
            ) from exc
        finally:
            if tty is not None:
                os.close(streams["stdin"])  # the child holds the slave now
        proc = ManagedProcess(
            pid=popen.pid,
            config={k: v for k, v in config.items() if v not in (None, "", [], {})},
            tag=request.get("tag"),
            popen=popen,
            tty=tty,
        )
        queue = proc.subscribe()
        self._processes[proc.pid] = proc
        loop = asyncio.get_running_loop()
        proc.exited = loop.create_future()
        proc.supervisor = loop.create_task(self._supervise(proc, proc.exited, timeout))
        return proc, queue

    async def _supervise(
        self, proc: ManagedProcess, exited: asyncio.Future[int], timeout: float | None
    ) -> None:
        loop = asyncio.get_running_loop()
        _watch_exit(loop, proc.popen, exited)
        # Futures settled by the pipes' reader callbacks, and a timer for the deadline: no
        # task per pipe and none for the wait, each of which costs every command its share.
        if proc.tty is not None:
            readers = [self._pump(proc, proc.tty, "pty")]
        else:
            readers = [
                self._pump(proc, proc.popen.stdout, "stdout"),
                self._pump(proc, proc.popen.stderr, "stderr"),
            ]
        deadline_hit = False

        def deadline() -> None:
            nonlocal deadline_hit
            if not exited.done():
                deadline_hit = True
                with contextlib.suppress(ProcessLookupError):
                    proc.popen.kill()

        timer = None if timeout is None else loop.call_later(timeout, deadline)
        try:
            returncode = await asyncio.shield(exited)  # others await it too (send_signal)
        finally:
            if timer is not None:
                timer.cancel()
        if not all(reader.done() for reader in readers):
            await asyncio.wait(readers, timeout=_DRAIN_AFTER_EXIT)
        for reader in readers:
            _settle(reader, None)  # stops a pipe that children still hold: see _pump
        for stream in (proc.popen.stdout, proc.popen.stderr, proc.popen.stdin):
            if stream is not None:
                with contextlib.suppress(OSError, ValueError):
                    loop.remove_reader(stream.fileno())
                with contextlib.suppress(OSError):
                    stream.close()
        if proc.tty is not None:
            with contextlib.suppress(OSError, ValueError):
                loop.remove_reader(proc.tty)
            with contextlib.suppress(OSError):
                os.close(proc.tty)
        self._processes.pop(proc.pid, None)
        if deadline_hit:
            proc.publish({"error": ConnectError("deadline_exceeded", "context deadline exceeded")})
        else:
            end: Event = {"exited": returncode >= 0, "status": _go_status(returncode)}
            exit_code = returncode if returncode >= 0 else -1
            if exit_code:
                end["exitCode"] = exit_code
            if returncode < 0:
                end["error"] = _go_status(returncode)
            proc.end = end
            proc.publish({"end": end})
        proc.finished.set()
        proc.publish(None)

    def _pump(self, proc: ManagedProcess, pipe: Any, name: str) -> asyncio.Future[None]:
        """Publish what the pipe gives until it ends; settled at its end (or to stop it)."""
        loop = asyncio.get_running_loop()
        fd = pipe if isinstance(pipe, int) else pipe.fileno()
        os.set_blocking(fd, False)
        ended: asyncio.Future[None] = loop.create_future()

        def readable() -> None:
            for _ in range(_READS_PER_WAKEUP):  # then let other work run; epoll calls again
                if ended.done():  # stopped: what children print later is not its output
                    loop.remove_reader(fd)
                    return
                try:
                    chunk = os.read(fd, CHUNK)
                except BlockingIOError:
                    return
                except OSError:
                    chunk = b""
                if not chunk:
                    loop.remove_reader(fd)
                    _settle(ended, None)
                    return
                proc.publish({"data": {name: chunk}})  # raw: each stream encodes its own way

        loop.add_reader(fd, readable)  # removed at its end, or by _supervise before the close
        return ended

    async def send_input(self, selector: dict[str, Any], data: bytes, *, pty: bool = False) -> None:
        """Write ``data`` to the process's stdin (or its pty) without blocking the loop."""
        proc = self.find(selector)
        if pty != (proc.tty is not None):
            where = "the pty" if proc.tty is not None else "the stdin"
            raise ConnectError("failed_precondition", f"input should be written to {where}")
        if proc.tty is not None:
            fd = proc.tty
        else:
            stdin = proc.popen.stdin
            if stdin is None or stdin.closed:
                raise ConnectError("failed_precondition", "stdin not enabled or closed")
            fd = stdin.fileno()
        loop = asyncio.get_running_loop()
        async with proc.stdin_lock:
            os.set_blocking(fd, False)
            view = memoryview(data)
            while view:
                try:
                    written = os.write(fd, view)
                except BlockingIOError:
                    ready: asyncio.Future[None] = loop.create_future()
                    loop.add_writer(fd, _settle, ready, None)
                    try:
                        await ready
                    finally:
                        loop.remove_writer(fd)
                    continue
                except BrokenPipeError as exc:
                    raise ConnectError("internal", f"error writing to stdin: {exc}") from exc
                view = view[written:]

    def resize(self, selector: dict[str, Any], spec: dict[str, Any]) -> None:
        """``Update``: give a PTY process's terminal a new size."""
        proc = self.find(selector)
        if proc.tty is None:
            raise ConnectError("internal", "error resizing tty: tty not assigned to process")
        resize(proc.tty, spec)

    async def close_stdin(self, selector: dict[str, Any]) -> None:
        """Close stdin so the process sees end of input."""
        proc = self.find(selector)
        if proc.tty is not None:
            raise ConnectError(
                "failed_precondition",
                "cannot close stdin for PTY process — send Ctrl+D (0x04) instead",
            )
        async with proc.stdin_lock:
            if proc.popen.stdin is not None:
                with contextlib.suppress(OSError):
                    proc.popen.stdin.close()

    async def send_signal(self, selector: dict[str, Any], name: Any) -> None:
        """Send SIGKILL or SIGTERM to the process (its pid only, as envd does).

        A SIGKILL is answered once the process is reaped (at most
        :data:`_REAPED_WITHIN` later), so a client that checks right after (``kill -0``)
        sees it gone rather than a zombie about to be collected.
        """
        proc = self.find(selector)
        signum = _SIGNALS.get(name)
        if signum is None:
            raise ConnectError("invalid_argument", f"invalid signal: {name}")
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signum)
        if signum == signal.SIGKILL and proc.exited is not None:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(asyncio.shield(proc.exited), _REAPED_WITHIN)

    def kill_all(self) -> None:
        """SIGKILL every process (envd shutting down)."""
        for proc in list(self._processes.values()):
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGKILL)
