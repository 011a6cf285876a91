"""The in-sandbox agent of the container backends: our envd, started with the image's python3.

A ``docker exec`` costs ~40 ms of runc process setup before the command runs; a server that
already runs inside the container starts a command in about a millisecond.  So a docker (or
kubernetes) sandbox may start our envd (:mod:`sandbox_runtime._envd.server`, standard library
only) next to its lifetime ``sleep``, and exec and files then go through it
(:class:`~sandbox_runtime._envd.commands.EnvdCommands`, the same code the ``ags`` backend runs
against the real envd).

How it is started, off the path of the start itself: the container's command becomes
:func:`launch_command`, the usual ``sleep`` with a small background starter beside it, which
runs ``python3`` at once if the image has one: it listens and imports what the server needs
(most of its start) while the backend uploads :func:`agent_archive` (the server package as a
zip, a start script and the sandbox's token, in a directory of the sandbox's own) in the
background, then serves from the zip.  The agent listens on the
container's own address, port :data:`AGENT_PORT`, and answers only requests carrying the
sandbox's token (``X-Access-Token``); the agent reads the token's file and removes it as it
starts, so the token is in no command line, no environment and no file once the agent runs.
Nothing is published on the host.

How it is used (:class:`AgentLink`): until the agent answers, and for good in an image without
``python3`` or a container whose address this host cannot reach, calls take the backend's
native path (or, for an image whose agent answered before, first wait a bounded time for it);
``mode="on"`` waits for the agent instead and fails when it never answers.  If
the agent stops answering later (a command killed it, it crashed), the call that finds its
port refusing, which provably sent nothing, runs on the native path, and so do the later
ones, whatever the mode: no call waits for an agent that is gone.  Meanwhile, where the
backend can, the agent is restarted off the caller's path (a few times per sandbox at most),
and calls return to it once it answers.  A command whose connection
broke after it started is an error, never run twice, and its processes are killed natively
(by the token in their environment), since no agent is left to stop them.  A sandbox that
died is known from its engine: a connect to its address that does not complete at once asks
whether it still runs (:mod:`._plain_http`), instead of dialling until ``EHOSTUNREACH``.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import io
import logging
import marshal
import posixpath
import secrets
import shlex
import tarfile
import threading
import time
import zipfile
from collections.abc import Callable, Iterator
from importlib import resources
from typing import BinaryIO, Literal, TypeVar

import httpx

from sandbox_runtime._core.backend import ExecRequest
from sandbox_runtime._core.results import ExecResult
from sandbox_runtime._core.retry import RetryPolicy
from sandbox_runtime.errors import BackendError, SandboxError, SandboxGoneError, SandboxStartError

from ._plain_http import PeerGone, PeerStalled
from .client import EnvdClient, EnvdError, StartRefused, shared_tls_context
from .commands import STATE_DIR, EnvdCommands

__all__ = [
    "AGENT_PORT",
    "AGENT_ROOT",
    "AgentLink",
    "AgentMode",
    "AgentRouting",
    "AgentUnreachable",
    "agent_archive",
    "agent_can_run",
    "agent_directory",
    "agent_state_command",
    "fallback_directory",
    "launch_command",
    "restart_command",
]

logger = logging.getLogger("sandbox_runtime.envd.agent")

T = TypeVar("T")
AgentMode = Literal["auto", "on", "off"]
# absent: never served this sandbox; lost: served it, then stopped answering; restarting: lost,
# and being started again off the callers' path.
_State = Literal["pending", "ready", "absent", "lost", "restarting"]

#: The agent's port inside the sandbox (envd's own port number).
AGENT_PORT = 49983
_PACKAGE = "srt_envd"
# A probe: an address that neither accepts nor refuses within ``connect``, that many times in
# a row, is unreachable from here (a container network this host is not on); a slow answer is
# a busy machine.  Once is not enough: the first packet to a new address waits for ARP, whose
# retry comes after a second (64 sandboxes starting at once on a loaded host lost one so).
_PROBE_TIMEOUT = httpx.Timeout(5.0, connect=1.0)
_UNREACHABLE_AFTER = 3
_PROBE_FIRST_INTERVAL = 0.01
_PROBE_MAX_INTERVAL = 0.05
# How long a call waits for the agent's answer (a command's start: its response head).  An
# agent that died refuses or resets at once; one that only answers late is a starved CPU (64
# sandboxes x 200 commands on 2 cores, a load of 130, kept 39 of 12,800 starts waiting past
# 60 s), and a start given up on may still have run, so waiting is the better failure.
_REQUEST_TIMEOUT = 300.0
# The least an ``auto`` call waits for an agent its image has shown it runs (see AgentLink).
_MIN_PATIENCE = 5.0
# How many times the slowest recent start of the image's agent a call waits for.
_PATIENCE_FACTOR = 4.0
# How many times one sandbox's agent is restarted after it stopped answering: a command that
# kills it every time leaves the sandbox on the native path after that.
_RESTARTS = 2

# Per image (backend, engine and image reference), how long its agents recently took to answer
# after their sandbox started: seconds, the slowest recent one weighing most.
_answer_delays: dict[str, float] = {}
_answer_delays_lock = threading.Lock()

# Where each sandbox's agent keeps its files and, until the agent has read it, its token: a
# directory of its own (a random name, mode 0700) in the container's own root filesystem, not
# below /tmp, which a volume may share between sandboxes.
AGENT_ROOT = "/.sandbox-runtime"

# The container's command ($1: lifetime, $2: the agent's directory, $3: its fallback): beside
# the main process (the usual sleep), a background starter readies the agent while its files
# upload.  Where the image has python3 and the starter can make one of the two directories, it
# names python3 sandbox-agent there (a command's "pkill python3" spares it) and runs
# _PREWARM, which listens, imports what the agent needs and waits for the files; else a shell
# loop waits for the files (the last entry of their archive marks them complete), then runs
# agent.sh.  Nothing of the token is in the command line the sandbox sees.  ``-S``: the agent
# is standard library only, so the image's site-packages and their .pth files (dozens in a
# conda image) are not read at its start.
_LAUNCH_TEMPLATE = (
    '(d="$2"; f="${{3:-$2}}"; p=$(command -v python3) && for w in "$d" "$f"; do '
    'mkdir -p -m 700 "$w" 2>/dev/null && ln -sf "$p" "$w/sandbox-agent" 2>/dev/null && '
    '[ -x "$w/sandbox-agent" ] && exec "$w/sandbox-agent" -E -s -S -c \'{prewarm}\' "$d" "$f"; '
    'done; n=0; while [ ! -e "$d/agent.ready" ] && [ ! -e "$f/agent.ready" ] '
    '&& [ $n -lt 1500 ]; do sleep 0.02; n=$((n+1)); done; [ -e "$f/agent.ready" ] && d="$f"; '
    '[ -e "$d/agent.ready" ] && exec /bin/sh "$d/agent.sh") >/dev/null 2>&1 & '
    'exec sleep "$1"'
)

# The prewarmed starter (python3 -c; argv: the agent's directory, its fallback).  It listens
# first, so that the backend's readiness probe waits in the backlog rather than being refused
# and trying again later; then it imports asyncio and the rest, most of the agent's start
# (60-90 ms on a 2-core host), while the files upload instead of after them.  Then, as
# agent.sh would: its pid in agent.pid, its output in agent.log, nothing without a token.
# Python 3.6 syntax, no single quotes (it is quoted in _LAUNCH_TEMPLATE).
_PREWARM = """\
import os, socket, sys, time
d, f, port = sys.argv[1], sys.argv[2], {port}
try:
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("0.0.0.0", port))
    s.listen(4096)
except OSError:
    s = None
sys.modules.setdefault("ssl", None)
for name in ("argparse asyncio base64 ctypes dataclasses datetime fcntl grp hmac json logging "
             "pty pwd resource secrets signal struct subprocess termios threading "
             "urllib.parse").split():
    try:
        __import__(name)
    except Exception:
        pass
end, w = time.monotonic() + 30, None
while w is None and time.monotonic() < end:
    for c in (f, d):
        if w is None and os.path.exists(c + "/agent.ready"):
            w = c
    time.sleep(0 if w else 0.002)
t = "%s/agent.token" % w
if w is None or not os.path.isfile(t) or not os.path.getsize(t):
    sys.exit(0)
with open(w + "/agent.pid", "w") as h:
    h.write("%d\\n" % os.getpid())
o = os.open(w + "/agent.log", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
os.dup2(o, 1)
os.dup2(o, 2)
sys.path.insert(0, w + "/agent.zip")
from {package}.__main__ import main
args = ["--token-file", t, "--exec-like", "--host", "0.0.0.0", "--port", str(port)]
sys.exit(main(args, listener=s))
"""
_LAUNCH = _LAUNCH_TEMPLATE.format(prewarm=_PREWARM.format(port=AGENT_PORT, package=_PACKAGE))

# Runs once the files are there.  The agent reads its token file and removes it itself before
# it serves anything (``--token-file``): the token passes through no environment (a process's
# first environment stays readable in /proc/<pid>/environ whatever it later unsets) and no
# command line.  Without python3 nothing starts.  The engine may still be setting
# agent.ready's owner and times when the loop sees it, so that one stays (removing it failed
# the upload now and then).
_START = """\
d={directory}
p=$(command -v python3) && [ -s "$d/agent.token" ] || exit 0
# Named sandbox-agent, so that a command's "pkill python" or "killall python3" spares it.
ln -sf "$p" "$d/sandbox-agent" && p="$d/sandbox-agent"
# exec keeps the shell's pid: the agent's, for agent_state_command and a restart's kill.
echo $$ >"$d/agent.pid"
exec "$p" -E -s -S "$d/agent.zip" --token-file "$d/agent.token" --host 0.0.0.0 \\
  --port {port} --exec-like </dev/null >"$d/agent.log" 2>&1
"""

# The agent speaks plain HTTP only: ``ssl`` (which asyncio imports when it can, and which loads
# libssl) is marked absent, a fifth of the agent's import time.  asyncio works without it.
_MAIN = (
    "import sys\nsys.modules.setdefault('ssl', None)\n"
    f"from {_PACKAGE}.__main__ import main\nsys.exit(main())\n"
)


@functools.lru_cache(maxsize=1)
def _agent_zip() -> bytes:
    """The server package as a runnable zip (``python3 agent.zip``), about 90 KB.

    Each module also goes in compiled by this interpreter, as an unchecked-hash ``.pyc``:
    an image whose ``python3`` is the same version skips compiling the sources at every
    start (a quarter of the agent's start-up CPU, which 64 sandboxes starting at once pay
    64 times); any other version finds a foreign magic number, ignores the ``.pyc`` and
    compiles the source, as zipimport does.
    """
    buffer = io.BytesIO()
    package = resources.files("sandbox_runtime._envd.server")
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("__main__.py", _MAIN)
        for entry in sorted(package.iterdir(), key=lambda item: item.name):
            if entry.name.endswith(".py"):
                name, source = f"{_PACKAGE}/{entry.name}", entry.read_bytes()
                archive.writestr(name, source)
                archive.writestr(name + "c", _unchecked_pyc(source, name))
    return buffer.getvalue()


def _unchecked_pyc(source: bytes, name: str) -> bytes:
    """``source`` compiled, in the ``.pyc`` layout that is used without checking the source."""
    code = compile(source, name, "exec", dont_inherit=True)
    flags = 0b01  # hash-based, check_source unset (PEP 552)
    return (
        importlib.util.MAGIC_NUMBER
        + flags.to_bytes(4, "little")
        + importlib.util.source_hash(source)
        + marshal.dumps(code)
    )


def agent_directory() -> str:
    """A new sandbox's agent directory: a name no other sandbox uses, under :data:`AGENT_ROOT`."""
    return f"{AGENT_ROOT}/{secrets.token_hex(8)}"


def fallback_directory(directory: str) -> str:
    """Where the agent goes when the image's user cannot create :data:`AGENT_ROOT`.

    A non-root pod extracts the agent's files as its own user, who may not write ``/``; the
    same random name under ``/tmp`` (mode 0700, and the token removed as the agent starts)
    then keeps the agent, and two sandboxes sharing a ``/tmp`` volume still never share it.
    """
    return f"{STATE_DIR}-agent-{posixpath.basename(directory)}"


# The same starter whose main process is a command of the caller's (the lifetime timer of
# ``_core/lifetime``, whose end can move) instead of a fixed sleep: "$4" on.
_LAUNCH_TIMED = _LAUNCH.replace('exec sleep "$1"', 'shift 3; exec "$@"')


def launch_command(
    lifetime_seconds: int,
    directory: str,
    fallback: str | None = None,
    *,
    timer: list[str] | None = None,
) -> list[str]:
    """The container's command: ``sleep`` (or ``timer``), with the agent's starter beside it.

    ``directory`` is the sandbox's :func:`agent_directory`, the one :func:`agent_archive`
    fills; the starter also watches ``fallback`` (:func:`fallback_directory`) when given.
    ``timer`` (an argument vector) replaces the ``sleep`` as the main process.
    """
    if timer is not None:
        head = ["/bin/sh", "-c", _LAUNCH_TIMED, "sandbox-runtime", str(lifetime_seconds)]
        return [*head, directory, fallback or directory, *timer]
    command = ["/bin/sh", "-c", _LAUNCH, "sandbox-runtime", str(lifetime_seconds), directory]
    return command + ([fallback] if fallback else [])


def restart_command(directory: str) -> list[str]:
    """The agent's start script, for a native exec once :func:`agent_archive` is back in place.

    The container's own starter ran once and became the agent; a restart runs the script
    the starter ran, from the sandbox's :func:`agent_directory`, after killing the previous
    agent if it still exists (a stopped one keeps its port, and would answer a request it
    read when it runs again).  The pid is checked to still be an agent's before the kill.
    """
    script = (
        'p=$(cat "$1/agent.pid" 2>/dev/null) && grep -q sandbox-agent "/proc/$p/cmdline" '
        '2>/dev/null && kill -9 "$p"; exec /bin/sh "$1/agent.sh"'
    )
    return ["/bin/sh", "-c", script, "sandbox-runtime", directory]


def agent_state_command(directory: str) -> list[str]:
    """Print the agent process's ``/proc/PID/stat`` line (read by :func:`agent_can_run`)."""
    return [
        "/bin/sh",
        "-c",
        'read -r s <"/proc/$(cat "$1/agent.pid")/stat" && echo "$s"',
        "sh",
        directory,
    ]


def agent_can_run(stat_line: str) -> bool:
    """Whether a ``/proc/PID/stat`` line describes a process that can run.

    The state follows the command name, which is in parentheses and may hold any character,
    so it is read after the last ``)``.  Stopped (``T``), traced (``t``), zombie (``Z``) and
    dead (``X``) processes answer nothing; an unreadable line says nothing either way.
    """
    _name, _, rest = stat_line.rpartition(")")
    fields = rest.split()
    return not fields or fields[0] not in ("T", "t", "Z", "X")


def agent_archive(token: str, directory: str) -> bytes:
    """The agent's files as a tar for the engine to extract at ``/``; ``agent.ready`` last.

    ``directory`` (mode 0700) holds the server, its start script and the token (mode 0600,
    removed by the agent as it starts).  The state directory (:data:`STATE_DIR`, where
    commands' standard input waits) comes too, world-writable with the sticky bit as ``/tmp``
    is, so that commands of any user can leave their standard input there.
    """
    buffer = io.BytesIO()
    base = directory.strip("/")
    start = _START.format(directory=shlex.quote(directory), port=AGENT_PORT)
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for folder_name, folder_mode in ((STATE_DIR.strip("/"), 0o1777), (base, 0o700)):
            folder = tarfile.TarInfo(folder_name)
            folder.type, folder.mode = tarfile.DIRTYPE, folder_mode
            archive.addfile(folder)
        entries = (
            ("agent.zip", _agent_zip(), 0o644),
            ("agent.sh", start.encode(), 0o644),
            ("agent.token", token.encode(), 0o600),
            ("agent.ready", b"", 0o644),
        )
        for name, data, mode in entries:
            info = tarfile.TarInfo(f"{base}/{name}")
            info.size, info.mode, info.mtime = len(data), mode, int(time.time())
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


class AgentUnreachable(BackendError):
    """The agent refused a connection: nothing was sent, the native path may run the call."""


class AgentLink:
    """One sandbox's way to its agent: readiness, the client, and when to use the native path.

    :meth:`start` runs the agent's setup off the caller's path, on a thread: ``upload`` puts
    the agent's files in the sandbox, then ``/health`` is asked until the agent answers (or
    the wait runs out, or the address turns out unreachable).  Meanwhile :meth:`commands`
    answers None (use the native path) without waiting, or, with ``mode="on"``, waits for the
    outcome and raises if there is no agent.  ``address`` gives the host the agent is reached
    at (None when the sandbox has none), ``is_alive`` whether the sandbox still runs.

    ``image`` names what the sandbox runs.  Once an agent of that image has answered, a later
    sandbox of it knows its agent is coming, and under load a native call costs more than the
    wait (each ``docker exec`` competes with every booting sandbox for the engine and the
    CPU): so with ``auto`` its first calls wait for the agent, for at most a few times the
    image's recent answer delays (:func:`_patience`).  A wait that runs out is not repeated:
    calls go native until the agent answers.  An agent that never answers makes its image
    unknown again.

    ``agent_running`` answers, by the native path, whether the agent's process can run (not
    stopped, not a zombie); it is asked only about a request whose answer is late, so a
    stopped agent costs a call seconds instead of the request timeout, and the agent is then
    treated as lost (killed and restarted where the backend can).

    ``kill_command`` kills, by the native path, every process whose environment carries a
    command's token (the backend's timeout kill): how a command whose agent died mid-way is
    stopped.  ``restart`` puts the agent's files back and starts it, detached, by the native
    path: how a lost agent comes back (off the callers' path; without it, the sandbox stays
    native).
    """

    def __init__(
        self,
        *,
        mode: AgentMode,
        token: str,
        address: Callable[[], str | None],
        is_alive: Callable[[], bool],
        name: str,
        wait: float,
        image: str | None = None,
        kill_command: Callable[[str], None] | None = None,
        restart: Callable[[], None] | None = None,
        agent_running: Callable[[], bool] | None = None,
    ) -> None:
        self.mode = mode
        self._kill_command = kill_command
        self._agent_running = agent_running
        self._restart = restart
        self._restarts_left = _RESTARTS
        self._lock = threading.Lock()
        self._token = token
        self._address = address
        self._is_alive = is_alive
        self._name = name
        self._wait = wait
        self._image = image
        self._started = time.monotonic()
        self._patience: float | None = None
        self._settled = threading.Event()
        self._state: _State = "pending"
        self._why = ""
        self._client: EnvdClient | None = None
        self._commands: EnvdCommands | None = None

    def start(self, upload: Callable[[], None]) -> None:
        """Upload the agent and wait for it on a daemon thread."""
        self._started = time.monotonic()
        self._patience = _patience(self._image, self._wait)
        thread = threading.Thread(
            target=self._settle, args=(upload,), name="sandbox-agent", daemon=True
        )
        thread.start()

    def wait(self) -> None:
        """Block until the agent answers; :class:`SandboxStartError` if it never will."""
        self._settled.wait()
        if self._state != "ready":
            raise SandboxStartError(self._required())

    def commands(self) -> EnvdCommands | None:
        """The agent's command and file primitives, or None: use the native path this time."""
        if self._state == "pending":
            if self.mode == "on":
                self._settled.wait()
            elif self._patience is not None:
                left = self._started + self._patience - time.monotonic()
                if left <= 0 or not self._settled.wait(left):
                    self._patience = None  # waited once: native until the agent answers
        if self._state == "ready":
            return self._commands
        if self._state == "absent" and self.mode == "on":
            raise BackendError(self._required())
        return None

    def _required(self) -> str:
        return f"{self._name}: the in-sandbox agent is required but {self._why}"

    def _settle(self, upload: Callable[[], None]) -> None:
        try:
            upload()
            self._probe()
        except Exception as exc:
            self._give_up(f"it could not be started ({exc})")
        finally:
            self._settled.set()

    def _probe(self) -> None:
        """Ask for ``/health`` until the agent answers, the wait runs out, or it cannot."""
        began = time.monotonic()
        host = self._address()
        if not host:
            self._give_up("the sandbox has no address this host can reach")
            return
        url = f"http://{host}:{AGENT_PORT}"
        # One client for all the probes: a client per probe built a TLS context each time,
        # which 64 sandboxes starting at once paid hundreds of times over.
        with httpx.Client(timeout=_PROBE_TIMEOUT, verify=shared_tls_context()) as probe:
            self._ask_until_ready(probe, url, began)

    def _ask_until_ready(self, probe: httpx.Client, url: str, began: float) -> None:
        delay, silent = _PROBE_FIRST_INTERVAL, 0
        while self._state in ("pending", "restarting"):  # else closed meanwhile: stopping
            try:
                answer = probe.get(f"{url}/health")
            except (
                httpx.ConnectError,
                httpx.ReadTimeout,
                httpx.ReadError,
                httpx.RemoteProtocolError,
            ):
                # Refused: not listening yet (or no python3 in the image); a slow, reset or
                # broken answer: starting on a busy machine, or the replaced agent's socket
                # closing under a restart.  None of them says the address is wrong.
                answer, silent = None, 0
            except httpx.HTTPError as exc:
                silent += 1
                if not isinstance(exc, httpx.ConnectTimeout) or silent >= _UNREACHABLE_AFTER:
                    self._give_up(f"{url} does not answer from here ({exc})")
                    return
                answer = None
            if answer is not None:
                if answer.status_code in (200, 204):
                    self._connect(url)
                else:
                    self._give_up(f"{url}/health answered {answer.status_code}")
                return
            if time.monotonic() - began >= self._wait:
                self._give_up(f"no agent answered within {self._wait:.0f}s (no python3?)")
                return
            time.sleep(delay)
            # Soon after an idle start; less often when many sandboxes boot at once.
            delay = min(delay * 1.5, _PROBE_MAX_INTERVAL)

    def _connect(self, url: str) -> None:
        previous = self._client
        self._client = EnvdClient(
            url,
            sandbox_id=self._name,
            token=self._token,
            request_timeout=_REQUEST_TIMEOUT,
            # A local agent has no gateway in front of it: a refusal means it is gone.
            policy=RetryPolicy(attempts=1),
            compress=False,
            plain_hot_path=True,
            alive=self._is_alive,
            responsive=self._agent_running,
        )
        self._commands = EnvdCommands(
            self._session,
            translated=self._translated,
            is_alive=self._is_alive,
            name=self._name,
            start_attempts=1,
            shell=self._find_shell(self._client),
            abandon=self._abandon,
        )
        with self._lock:
            stale = self._state not in ("pending", "restarting")  # closed meanwhile
            if self._state == "pending":
                _learn(self._image, time.monotonic() - self._started)
            if not stale:
                self._state = "ready"
        if stale and self._client is not None:
            self._client.close()
        if previous is not None:
            previous.close()  # a lost agent's: its connections are dead
        logger.debug("%s: exec and files through the in-sandbox agent at %s", self._name, url)

    @staticmethod
    def _find_shell(client: EnvdClient) -> str | None:
        """``bash`` when the image has it, else ``/bin/sh``; None (ask per command) if unsure."""
        probe = ["/bin/sh", "-c", "command -v bash >/dev/null 2>&1 && echo bash || echo sh"]
        try:
            out = b"".join(
                v for k, v in client.start(probe, envs={}, server_timeout=30) if k == "stdout"
            )
        except (httpx.HTTPError, EnvdError):
            return None
        return {b"bash": "bash", b"sh": "/bin/sh"}.get(out.strip())

    def _give_up(self, why: str) -> None:
        if self._state == "restarting":
            self._state, self._why = "lost", why
            logger.warning("%s: the in-sandbox agent %s; native exec", self._name, why)
            return
        if self._state == "pending":  # not a sandbox closed while its agent was starting
            _learn(self._image, None)
        self._state, self._why = "absent", why
        logger.debug("%s: native exec (%s)", self._name, why)

    def _session(self) -> EnvdClient:
        client = self._client
        if client is None:
            raise SandboxGoneError(f"{self._name}: the agent's connection is closed")
        return client

    def _translated(self, operation: Callable[[], T], what: str) -> T:
        """Run a client call; its failure as one of our errors (see the module docstring)."""
        try:
            return operation()
        except (httpx.HTTPError, EnvdError, OSError) as exc:
            if isinstance(exc, SandboxError) and not isinstance(exc, EnvdError):
                raise  # already one of ours (a missing file is also an OSError)
            if _caused_by(exc, PeerGone):
                self._state = "lost"  # later calls hear it from the engine, without dialling
                raise SandboxGoneError(f"{self._name} is gone ({exc})") from exc
            if _caused_by(exc, PeerStalled):
                # The request may have reached it: an error, never run twice (its command was
                # killed by _abandon); later calls go native while a new agent replaces it.
                self._lost(exc)
                raise BackendError(
                    f"{what}: the in-sandbox agent stopped answering (its process is stopped"
                    f" or dead); the call was abandoned and later calls go native: {exc}"
                ) from exc
            if _nothing_sent(exc):
                # Refused: the agent is gone.  If the sandbox is ending too, the native path
                # says so at once; no need to wait here for the engine to notice.
                self._lost(exc)
                raise AgentUnreachable(f"{what}: the in-sandbox agent is gone ({exc})") from exc
            if self._gone():
                raise SandboxGoneError(f"{self._name} is gone ({exc})") from exc
            raise BackendError(f"{what} through the in-sandbox agent failed: {exc}") from exc

    def _abandon(self, token: str, exc: BaseException) -> None:
        """A command's stream broke after it was sent: kill its processes natively.

        The agent that ran it is likely dead and cannot; left alone, the command would go on
        (its writes landing after the caller was told it failed).  A start that provably
        sent nothing started nothing.
        """
        if self._kill_command is None or _nothing_sent(exc) or _caused_by(exc, PeerGone):
            return
        try:
            self._kill_command(token)
        except Exception as failure:  # the sandbox is ending: the translation says so
            logger.debug("%s: could not kill an abandoned command: %s", self._name, failure)

    def _gone(self) -> bool:
        """Whether the sandbox ended, looking a little while: the agent dies first when it does.

        An engine still reports a container it is killing as running for a moment, so one
        look right after the connection broke would blame the agent for the sandbox's end.
        """
        for delay in (0.0, 0.1, 0.2, 0.4, 0.8):
            time.sleep(delay)
            if not self._is_alive():
                return True
        return False

    def _lost(self, exc: BaseException) -> None:
        """The native path from now on, in every mode: a command killed the agent, or it died.

        No call waits for a restart: one costs a native exec and the agent's start-up
        (~0.3-0.6 s here) while a native call costs ~0.05-0.1 s, but once back the agent saves
        that much on every call (docs/reliability.md).  So the agent is restarted on a thread
        of its own, and calls go native until it answers.
        """
        with self._lock:
            if self._state != "ready":
                return
            self._state, self._why = "lost", f"it stopped answering ({exc})"
            revive = self._restart is not None and self._restarts_left > 0
            if revive:
                self._restarts_left -= 1
                self._state = "restarting"
        logger.warning(
            "%s: the in-sandbox agent stopped answering (%s); native exec%s",
            self._name,
            exc,
            " while it restarts" if revive else "",
        )
        if revive:
            threading.Thread(target=self._revive, name="sandbox-agent", daemon=True).start()

    def _revive(self) -> None:
        """Start the agent again and wait for it to answer (see :meth:`_lost`)."""
        assert self._restart is not None
        try:
            self._restart()
            self._probe()
        except Exception as exc:
            self._give_up(f"could not be restarted ({exc})")

    def close_idle(self) -> None:
        """Close the idle connections to the agent while it still answers their close.

        Called before the sandbox is removed: a connection closed after that sends its
        ``FIN`` to an address nobody holds, and the host's retransmissions leave its
        neighbour (ARP) entry unresolved for about a second.  The engine gives the next
        container the same address, and its first packets wait out that second: a
        sequential ``agent: on`` start measured 1.2 s instead of 0.4.
        """
        client = self._client
        if client is not None:
            client.close_idle()

    def close(self) -> None:
        """Close the connection pool; calls take the native path from now on."""
        self._state, self._why = "absent", "the sandbox was closed"
        self._settled.set()  # a call waiting for the agent stops waiting
        client, self._client = self._client, None
        if client is not None:
            client.close()


def _patience(image: str | None, wait: float) -> float | None:
    """How long an ``auto`` call waits for this image's agent; None: it goes native at once."""
    with _answer_delays_lock:
        delay = _answer_delays.get(image) if image else None
    if delay is None:
        return None
    return min(wait, max(_MIN_PATIENCE, _PATIENCE_FACTOR * delay))


def _learn(image: str | None, delay: float | None) -> None:
    """Record an agent of ``image`` answering ``delay`` s after its start, or never (None).

    The slowest recent delay dominates and older ones halve with each new answer, so a burst
    of starts raises the patience for the sandboxes of that burst, and it decays after.
    """
    if not image:
        return
    with _answer_delays_lock:
        if delay is None:
            _answer_delays.pop(image, None)
        else:
            _answer_delays[image] = max(delay, 0.5 * _answer_delays.get(image, 0.0))


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and its causes (``__cause__``, else ``__context__``), each once.

    A chain can loop (an error raised from itself, or two that name each other); without
    the visited set a walk down such a chain would never end.
    """
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _caused_by(exc: BaseException, kind: type[BaseException]) -> bool:
    """Whether ``exc`` or anything in its chain of causes is a ``kind``."""
    return any(isinstance(seen, kind) for seen in _chain(exc))


def _nothing_sent(exc: BaseException) -> bool:
    """Whether a failure provably sent nothing: a refused connection and no earlier failure.

    A broken stream or a timeout may have reached the agent, and a command it reached may
    have started; only a connection refused from the first try is certain.
    """
    refused = False
    for seen in _chain(exc):
        if isinstance(seen, httpx.ConnectError):
            refused = True
        elif isinstance(seen, StartRefused):
            pass
        elif isinstance(seen, (httpx.HTTPError, EnvdError)):
            return False
    return refused


class AgentRouting:
    """A backend's primitives through its agent when it answers, else its native ones.

    Mixed into a :class:`~sandbox_runtime._core.backend.Backend` before it: the backend keeps its
    own ``_native_exec``, ``_native_put_archive`` and ``_native_get_archive`` and sets
    ``_agent`` when it starts one.  A call the agent provably never received
    (:class:`AgentUnreachable`) runs on the native path instead; any other failure stands.
    """

    _agent: AgentLink | None = None

    def _fast(self) -> EnvdCommands | None:
        agent = self._agent
        return agent.commands() if agent is not None else None

    def _native_exec(self, request: ExecRequest) -> ExecResult:
        raise NotImplementedError

    def _native_put_archive(self, data: bytes) -> None:
        raise NotImplementedError

    def _native_get_archive(self, path: str) -> bytes:
        raise NotImplementedError

    def exec(self, request: ExecRequest) -> ExecResult:
        """Run a command through the agent, or natively."""
        fast = self._fast()
        if fast is not None:
            with contextlib.suppress(AgentUnreachable):
                return fast.exec(request)
        return self._native_exec(request)

    def put_archive(self, data: bytes) -> None:
        """Extract a tar at ``/`` through the agent, or natively."""
        fast = self._fast()
        if fast is not None:
            with contextlib.suppress(AgentUnreachable):
                return fast.put_archive(data)
        self._native_put_archive(data)

    def get_archive(self, path: str) -> bytes:
        """A tar of ``path`` through the agent, or natively."""
        fast = self._fast()
        if fast is not None:
            with contextlib.suppress(AgentUnreachable):
                return fast.get_archive(path)
        return self._native_get_archive(path)

    def write_file(self, path: str, data: bytes, mode: int = 0o644) -> None:
        """Through the agent's ``/files``, or the backend's own way."""
        fast = self._fast()
        if fast is not None:
            with contextlib.suppress(AgentUnreachable):
                return fast.write_file(path, data, mode)
        super().write_file(path, data, mode)  # type: ignore[misc]

    def read_file(self, path: str) -> bytes:
        """Through the agent's ``/files``, or the backend's own way."""
        fast = self._fast()
        if fast is not None:
            with contextlib.suppress(AgentUnreachable):
                return fast.read_file(path)
        return super().read_file(path)  # type: ignore[misc,no-any-return]

    def read_file_to(self, path: str, sink: BinaryIO) -> None:
        """Streamed through the agent, or the backend's own way."""
        fast = self._fast()
        if fast is not None:
            with contextlib.suppress(AgentUnreachable):
                return fast.read_file_to(path, sink)
        super().read_file_to(path, sink)  # type: ignore[misc]

    def exists(self, path: str) -> bool:
        """The agent's ``Stat``, or the backend's own way."""
        fast = self._fast()
        if fast is not None:
            with contextlib.suppress(AgentUnreachable):
                return fast.exists(path)
        return super().exists(path)  # type: ignore[misc,no-any-return]
