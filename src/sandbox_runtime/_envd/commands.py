"""Commands and files of one sandbox through its envd, with the guarantees of the core's exec.

The ``ags`` backend (the real envd) and the agent path of the container backends (our envd,
started in the container) run commands the same way, so the rules live here once:

* every command runs under the shared in-sandbox wrapper (:mod:`sandbox_runtime._core.shell`);
  a timeout kills every process the command started, ``setsid`` children included, and
  returns the output so far with exit code 124; a non-zero exit is data, not an error;
* a command is sent again only when its start provably ran nothing: envd refused it, or the
  connection broke before the wrapper created its start marker and before the command was
  among envd's processes; a command that started is never run twice;
* standard input and archives travel through envd's ``/files`` and wait in a state directory.

What differs between the users, the translation of client errors into
:mod:`sandbox_runtime.errors` (with a token refresh on AGS), the question whether the
sandbox still lives, and what to do about a command whose stream broke (``abandon``: the
agent path kills its processes natively, since no envd is left to do it), is passed in.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import logging
import math
import signal
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import BinaryIO, Protocol, TypeVar

import httpx

from sandbox_runtime._core import shell as _shell
from sandbox_runtime._core.backend import ExecRequest
from sandbox_runtime._core.output import HeadTailBuffer
from sandbox_runtime._core.results import TIMEOUT_EXIT_CODE, ExecResult
from sandbox_runtime._core.retry import RetryPolicy, backoff, notify_retry
from sandbox_runtime._core.shell import check_cwd
from sandbox_runtime.errors import (
    BackendError,
    SandboxError,
    SandboxFileNotFoundError,
    SandboxGoneError,
    SandboxTimeoutError,
)

from .client import EnvdClient, EnvdError, ProcessEvent, StartRefused

__all__ = ["STATE_DIR", "Abandon", "EnvdCommands", "Translator"]

logger = logging.getLogger("sandbox_runtime.envd")

T = TypeVar("T")

#: Where a command's standard input and uploaded archives wait (envd creates parents).
STATE_DIR = "/tmp/.sandbox-runtime"
# Extra time the server-side stream deadline allows beyond a command's timeout: a safety net
# that ends the stream even if our own kill never reached the sandbox.
_SERVER_DEADLINE_GRACE = 30.0
_KILL_TIMEOUT = 15.0
_UNLIMITED = 1 << 40
_MISSING_EXIT = 44
#: Sending again a command that provably never started (refused, or its connection broke
#: before its marker existed).  Such a start ran nothing, so it is as safe to send again as
#: an idempotent call.  With 20% of envd answers failing (tests/ags/test_chaos.py), four
#: attempts failed a command in about one run in ten; eight, at the same rate, in about one
#: run in a thousand.  Waits of at most 2 s keep the eight within ~11 s.
_START_RETRIES = RetryPolicy(attempts=8, initial_wait=0.2, max_wait=2.0)


Abandon = Callable[[str, BaseException], None]
"""Called with a command's token and the failure when its stream broke before its end."""


class Translator(Protocol):
    """Runs one client call and raises its failure as a :class:`SandboxError`."""

    def __call__(self, operation: Callable[[], T], what: str) -> T:
        """The result of ``operation()``, or its failure translated."""
        ...


class EnvdCommands:
    """The exec and file primitives of a backend, spoken through envd; see the module doc."""

    def __init__(
        self,
        session: Callable[[], EnvdClient],
        *,
        translated: Translator,
        is_alive: Callable[[], bool],
        name: str,
        state_dir: str = STATE_DIR,
        start_attempts: int = _START_RETRIES.attempts,
        shell: str | None = None,
        abandon: Abandon | None = None,
    ) -> None:
        self._session = session
        self._abandon = abandon
        self._start_attempts = start_attempts
        # The interpreter when known (saves the /bin/sh that looks for bash on every command).
        self._shell = shell
        self._translated = translated
        self._is_alive = is_alive
        self._name = name
        self._state_dir = state_dir

    # -- commands ----------------------------------------------------------------------------

    def exec(self, request: ExecRequest) -> ExecResult:
        """Run one command under the wrapper; see the module docstring for the guarantees."""
        session = self._session()
        began = time.monotonic()
        token = _shell.new_token()
        stdin_file = self._upload_stdin(session, request.stdin, token)
        # The marker only serves a decision to send a start again; with one attempt there is
        # none to make, and not creating it saves a process per command.
        marker = f"{self._state_dir}/{token}.started" if self._start_attempts > 1 else None
        argv = _shell.wrapped_argv(
            request.command, request.cwd, token, self._shell, stdin_file, marker
        )
        envs = {**request.env, _shell.TOKEN_VAR: token}
        stdout, stderr = request.output_buffers()
        run = _CommandRun(self, token, request.timeout, stdout, stderr)
        end = self._follow(run, argv, envs, marker)
        timed_out = run.timed_out.is_set()
        exit_code = TIMEOUT_EXIT_CODE if timed_out else self._exit_code(end)
        if not timed_out:
            check_cwd(exit_code, stderr.getvalue(), request.cwd)
        return ExecResult.from_buffers(
            request.display,
            exit_code,
            stdout,
            stderr,
            began=began,
            timed_out=timed_out,
        )

    def _upload_stdin(self, session: EnvdClient, data: bytes | None, token: str) -> str | None:
        """Put the command's standard input where its wrapper reads it; its path, or None."""
        if data is None:
            return None
        stdin_file = f"{self._state_dir}/{token}.stdin"
        self._translated(lambda: session.write(stdin_file, data), "upload stdin")
        return stdin_file

    def _follow(
        self, run: _CommandRun, argv: list[str], envs: dict[str, str], marker: str | None
    ) -> tuple[int, str] | None:
        """Start the command and read its events; its end, or None once its timeout killed it."""
        timeout = run.timeout
        server_timeout = None if timeout is None else timeout + _SERVER_DEADLINE_GRACE

        def follow() -> tuple[int, str] | None:
            try:
                return run.consume(self._start_once(argv, envs, server_timeout, marker))
            except Exception as exc:
                # Before the translation, which may take a while to decide what happened.
                if self._abandon is not None and not run.timed_out.is_set():
                    self._abandon(run.token, exc)
                raise

        try:
            return self._translated(follow, "exec")
        except SandboxError as exc:
            if not run.timed_out.is_set() or isinstance(exc, SandboxGoneError):
                raise
            return None  # the stream ended early because we killed the command: a timeout
        finally:
            if run.deadline is not None:
                run.deadline.cancel()

    def _exit_code(self, end: tuple[int, str] | None) -> int:
        """The exit code of a command that was not timed out, from its end event."""
        if end is None:
            if not self._is_alive():
                raise SandboxGoneError(f"sandbox {self._name} ended during the command")
            raise BackendError("the command's output stream ended without an exit code")
        exit_code = end[0]
        if exit_code < 0:  # killed by a signal, reported the way a shell does
            exit_code = 128 + _signal_number(end[1])
        return exit_code

    def _start_once(
        self,
        argv: list[str],
        envs: dict[str, str],
        server_timeout: float | None,
        marker: str | None,
    ) -> Iterator[ProcessEvent]:
        """The events of ``argv``, started exactly once.

        A start that envd refused, or whose connection broke before the wrapper created its
        marker, provably ran nothing and is sent again (with backoff); once the marker
        exists, a broken connection is an error, never a second run.
        """
        for attempt in range(1, self._start_attempts + 1):
            session = self._session()
            started = False
            try:
                for event in session.start(argv, envs=envs, server_timeout=server_timeout):
                    started = True
                    yield event
                return
            except StartRefused as exc:
                if not exc.transient or attempt == self._start_attempts:
                    raise
                wait = exc.retry_after
                notify_retry(exc)
            except (httpx.TransportError, EnvdError) as exc:
                if (
                    started
                    or marker is None  # one attempt only: never a second start
                    or attempt == self._start_attempts
                    or _may_have_run(session, envs[_shell.TOKEN_VAR], marker)
                ):
                    raise EnvdError(
                        f"the connection to envd broke while the command ran ({exc}); it is not "
                        "run again because it had started",
                        transient=False,
                    ) from exc
                wait = None
                notify_retry(exc)
            delay = wait if wait is not None else backoff(_START_RETRIES, attempt)
            logger.warning(
                "command start on %s not delivered (attempt %d); sending it again in %.2fs",
                self._name,
                attempt,
                delay,
            )
            time.sleep(delay)

    def _kill_command(self, token: str, pid_box: list[int]) -> None:
        """Kill every process of a timed-out command, then its wrapper (ends the stream)."""
        try:
            session = self._session()
        except SandboxError:
            return
        try:
            for _ in session.start(
                _shell.kill_group_script(token), envs={}, server_timeout=_KILL_TIMEOUT
            ):
                pass
        except Exception as exc:
            logger.warning("could not kill a timed-out command in %s: %s", self._name, exc)
        if pid_box:
            with contextlib.suppress(Exception):
                session.signal_kill(pid_box[0])

    def run_quick(self, argv: list[str], what: str) -> tuple[int, bytes, bytes]:
        """Run a short helper command; returns exit code, stdout and stderr (unbounded)."""
        request = ExecRequest(
            command=tuple(argv), cwd="/", timeout=600, max_output_bytes=_UNLIMITED
        )
        result = self.exec(request)
        if result.timed_out:
            raise SandboxTimeoutError(f"{what} timed out", result)
        return result.exit_code, result.stdout_bytes, result.stderr_bytes

    # -- files -------------------------------------------------------------------------------

    def write_file(self, path: str, data: bytes, mode: int = 0o644) -> None:
        """Upload through envd's ``/files``; a mode other than 0644 costs one ``chmod``."""
        session = self._session()
        self._translated(lambda: session.write(path, data), f"write {path}")
        if mode & 0o7777 != 0o644:
            code, _out, err = self.run_quick(["chmod", f"{mode & 0o7777:o}", path], "chmod")
            if code != 0:
                raise BackendError(f"chmod {path} failed: {err.decode(errors='replace')}")

    def read_file_to(self, path: str, sink: BinaryIO) -> None:
        """Stream envd's ``/files`` answer into ``sink``."""
        session = self._session()
        self._translated(lambda: session.read_into(path, sink), f"read {path}")

    def read_file(self, path: str) -> bytes:
        """Download through envd's ``/files``."""
        session = self._session()
        return self._translated(lambda: session.read(path), f"read {path}")

    def exists(self, path: str) -> bool:
        """Envd's ``Stat``."""
        session = self._session()
        return self._translated(lambda: session.stat(path), f"stat {path}") is not None

    def put_archive(self, data: bytes) -> None:
        """Upload the tar through ``/files`` and extract it at ``/`` with ``tar``."""
        session = self._session()
        archive = f"{self._state_dir}/{uuid.uuid4().hex}.tar"
        self._translated(lambda: session.write(archive, data), "upload archive")
        script = (
            'if tar --version 2>/dev/null | grep -q GNU; then tar --no-overwrite-dir -xf "$1" -C /;'
            ' else tar -xf "$1" -C /; fi; rc=$?; rm -f "$1"; exit $rc'
        )
        code, _out, err = self.run_quick(["/bin/sh", "-c", script, "sh", archive], "extract")
        if code != 0:
            raise BackendError(f"extracting the archive failed: {err.decode(errors='replace')}")

    def get_archive(self, path: str) -> bytes:
        """``tar -c`` of the path, read from the command's output as exact bytes."""
        script = (
            f'[ -e "$1" ] || [ -L "$1" ] || exit {_MISSING_EXIT}; '
            'd=$(dirname -- "$1"); b=$(basename -- "$1"); exec tar -cf - -C "$d" -- "$b"'
        )
        code, out, err = self.run_quick(["/bin/sh", "-c", script, "sh", path], "archive")
        if code == _MISSING_EXIT:
            raise SandboxFileNotFoundError(f"no such file or directory in the sandbox: {path}")
        if code != 0:
            raise BackendError(f"archiving {path} failed: {err.decode(errors='replace')}")
        if not out:
            raise BackendError("tar produced no output")
        return out


class _CommandRun:
    """One command's stream as it is read: output, pid, timeout, and its end once it came.

    The state outlives one pass over the events: a translator may call again (a refreshed
    token), and the deadline set at the first start stays the command's.
    """

    __slots__ = (
        "commands",
        "deadline",
        "end",
        "pids",
        "stderr",
        "stdout",
        "timed_out",
        "timeout",
        "token",
    )

    def __init__(
        self,
        commands: EnvdCommands,
        token: str,
        timeout: float | None,
        stdout: HeadTailBuffer,
        stderr: HeadTailBuffer,
    ) -> None:
        self.commands = commands
        self.token = token
        self.timeout = timeout
        self.stdout = stdout
        self.stderr = stderr
        self.timed_out = threading.Event()
        self.pids: list[int] = []
        self.deadline: _Deadline | None = None
        self.end: tuple[int, str] | None = None

    def consume(self, events: Iterator[ProcessEvent]) -> tuple[int, str] | None:
        """Route each event: the pid (and the deadline from then on), output, the end."""
        stdout, stderr = self.stdout, self.stderr
        for kind, value in events:
            if kind == "start":
                self.pids.append(value)
                if self.timeout is not None and self.deadline is None:
                    self.deadline = _DEADLINES.add(time.monotonic() + self.timeout, self.expire)
            elif kind == "stdout":
                stdout.write(value)
            elif kind == "stderr":
                stderr.write(value)
            elif kind == "end":
                self.end = value
        return self.end

    def expire(self) -> None:
        """The timeout passed: kill the command (its stream then ends)."""
        self.timed_out.set()
        self.commands._kill_command(self.token, self.pids)


class _Deadline:
    """One command's timeout: its action runs once the time passes, unless cancelled."""

    __slots__ = ("action", "cancelled", "when")

    def __init__(self, when: float, action: Callable[[], None]) -> None:
        self.when = when
        self.action = action
        self.cancelled = False

    def cancel(self) -> None:
        """Never run the action (a no-op once it ran)."""
        self.cancelled = True


class _Deadlines:
    """Every command's timeout on one thread, instead of a timer thread per command.

    Starting a thread costs about a millisecond on a busy machine, as much as the whole
    command through a local agent.  A deadline that passes runs its action (a kill, which
    waits on the network) on a thread of its own, so one kill never delays another.
    """

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, _Deadline]] = []
        self._order = itertools.count()
        self._wakeup = threading.Condition()
        self._thread: threading.Thread | None = None
        # When the thread wakes next by itself (the earliest deadline it saw), under _wakeup.
        self._sleeping_until = -math.inf

    def add(self, when: float, action: Callable[[], None]) -> _Deadline:
        """Run ``action`` at monotonic time ``when`` unless the returned deadline is cancelled."""
        deadline = _Deadline(when, action)
        with self._wakeup:
            heap = self._heap
            while heap and heap[0][2].cancelled:  # commands that ended: not waited for
                heapq.heappop(heap)
            heapq.heappush(heap, (when, next(self._order), deadline))
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="envd-deadlines", daemon=True
                )
                self._thread.start()
            elif when < self._sleeping_until:
                # Only a deadline before the thread's own wakeup wakes it.  Waking it for
                # every command cost each one a thread switch, and the timeouts of a run are
                # alike: a new deadline almost never comes first.
                self._wakeup.notify()
        return deadline

    def _run(self) -> None:
        while True:
            with self._wakeup:
                while self._heap and self._heap[0][2].cancelled:
                    heapq.heappop(self._heap)
                if not self._heap:
                    self._sleeping_until = math.inf
                    self._wakeup.wait()
                    continue
                self._sleeping_until = self._heap[0][0]
                wait = self._sleeping_until - time.monotonic()
                if wait > 0:
                    self._wakeup.wait(wait)
                    continue
                deadline = heapq.heappop(self._heap)[2]
            if not deadline.cancelled:
                threading.Thread(target=deadline.action, name="envd-timeout", daemon=True).start()


_DEADLINES = _Deadlines()


def _signal_number(status: str) -> int:
    """The signal an envd status names (``signal: segmentation fault``, Go's words), or 15.

    Go's words are the C library's descriptions, lower-cased, and so are this agent's; an
    unknown name counts as a termination (``killed`` as a kill), as the old rule had it.
    """
    name = status.removeprefix("signal: ").removesuffix(" (core dumped)").strip().lower()
    if name.isdigit():
        return int(name)
    number = _SIGNALS_BY_DESCRIPTION.get(name)
    if number is not None:
        return number
    return int(signal.SIGKILL if "killed" in name else signal.SIGTERM)


def _signal_descriptions() -> dict[str, int]:
    described: dict[str, int] = {}
    for number in sorted(signal.valid_signals()):
        with contextlib.suppress(ValueError):
            description = signal.strsignal(number)
            if description:
                described.setdefault(description.lower(), int(number))
    return described


_SIGNALS_BY_DESCRIPTION = _signal_descriptions()


def _may_have_run(session: EnvdClient, token: str, marker: str) -> bool:
    """Whether a start whose connection broke may have started its command.

    The command (its wrapper's argument vector holds ``token``) is among envd's processes
    while it runs, and its wrapper creates ``marker`` before anything else: looking at the
    processes first and the marker second sees a command that started, whether it still
    runs or ended in between.
    """
    if session.stat(marker) is not None:
        return True
    if any(token in command for command in session.processes()):
        return True
    return session.stat(marker) is not None
