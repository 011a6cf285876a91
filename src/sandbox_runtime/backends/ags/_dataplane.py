"""The data plane through the e2b SDK: one ``e2b.Sandbox`` per instance, its own settings.

Connection settings (envd URL, domain, access token, timeouts) are passed to the SDK's
``ConnectionConfig`` of that one sandbox, never through ``os.environ``, so any number of
sandboxes with different instances and tokens can run in the threads of one process.

Files go through the SDK's public ``files`` API.  Commands use the SDK's envd process
client (``commands._rpc``, the client ``commands.run`` itself uses) instead of
``commands.run``, because ``commands.run``

* starts ``/bin/bash -l -c`` (a login shell that resets ``PATH`` and sources profiles),
* decodes output chunk by chunk as UTF-8 with replacement, losing non-UTF-8 bytes, and
* raises on a non-zero exit;

the raw stream gives exact bytes, the pid, and the exit code as data.  That client's shape
is stable across the pinned e2b range (``e2b>=2.15.2,<2.25``); this module is the only place
that depends on it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

from sandbox_runtime.errors import BackendUnavailableError

try:
    import e2b
    import e2b_connect
    from e2b import exceptions as e2b_errors
    from e2b.connection_config import KEEPALIVE_PING_HEADER, ConnectionConfig
    from e2b.envd.process import process_pb2
    from packaging.version import Version
except ImportError as exc:  # pragma: no cover - exercised through the registry's message
    raise ImportError(
        "the ags backend needs the e2b SDK: pip install 'sandbox-runtime[ags]'"
    ) from exc

__all__ = ["ENVD_PORT", "EnvdSession", "StreamEvent", "e2b", "e2b_errors"]

ENVD_PORT = 49983
_MIN_E2B, _MAX_E2B = Version("2.15.2"), Version("2.25")

StreamEvent = tuple[str, Any]


def check_sdk_version() -> None:
    """Refuse e2b versions outside the range this adapter was written and tested for."""
    from importlib.metadata import version

    installed = Version(version("e2b"))
    if not _MIN_E2B <= installed < _MAX_E2B:
        raise BackendUnavailableError(
            f"the ags backend supports e2b>={_MIN_E2B},<{_MAX_E2B}, found {installed}: "
            "pip install 'sandbox-runtime[ags]'"
        )


class EnvdSession:
    """The e2b SDK objects for one instance's envd."""

    def __init__(self, sandbox: e2b.Sandbox, request_timeout: float) -> None:
        self.sandbox = sandbox
        self.request_timeout = request_timeout
        self._lock = threading.Lock()

    @classmethod
    def connect(
        cls,
        *,
        sandbox_id: str,
        access_token: str | None,
        domain: str,
        sandbox_url: str | None,
        envd_version: str,
        request_timeout: float,
    ) -> EnvdSession:
        """A session for an instance started elsewhere (the Cloud API), from its token."""
        headers = {"E2b-Sandbox-Id": sandbox_id, "E2b-Sandbox-Port": str(ENVD_PORT)}
        if access_token:
            headers["X-Access-Token"] = access_token
        config = ConnectionConfig(
            domain=domain,
            sandbox_url=sandbox_url,
            request_timeout=request_timeout,
            extra_sandbox_headers=headers,
        )
        sandbox = e2b.Sandbox(
            sandbox_id=sandbox_id,
            sandbox_domain=domain,
            envd_version=Version(envd_version),
            envd_access_token=access_token,
            traffic_access_token=None,
            connection_config=config,
        )
        return cls(sandbox, request_timeout)

    # -- processes ---------------------------------------------------------------------------

    def start(
        self,
        argv: list[str],
        *,
        envs: dict[str, str],
        server_timeout: float | None,
    ) -> Iterator[StreamEvent]:
        """Start ``argv`` and yield its events as they arrive.

        Events are ``("start", pid)``, ``("stdout"|"stderr", bytes)`` and
        ``("end", (exit_code, status))``.
        """
        request = process_pb2.StartRequest(
            process=process_pb2.ProcessConfig(cmd=argv[0], args=argv[1:], envs=envs, cwd="/"),
            stdin=False,
        )
        events = self.sandbox.commands._rpc.start(
            request,
            headers={KEEPALIVE_PING_HEADER: "30"},
            timeout=server_timeout,
            request_timeout=self.request_timeout,
        )
        try:
            for response in events:
                event = response.event
                if event.HasField("start"):
                    yield "start", int(event.start.pid)
                elif event.HasField("data"):
                    if event.data.stdout:
                        yield "stdout", bytes(event.data.stdout)
                    if event.data.stderr:
                        yield "stderr", bytes(event.data.stderr)
                elif event.HasField("end"):
                    yield "end", (int(event.end.exit_code), str(event.end.status))
        finally:
            events.close()

    def kill(self, pid: int) -> bool:
        """SIGKILL one pid (False if envd no longer knows it)."""
        return bool(self.sandbox.commands.kill(pid, request_timeout=self.request_timeout))

    # -- files -------------------------------------------------------------------------------

    def write(self, path: str, data: bytes) -> None:
        """Create or replace a file, creating parents."""
        self.sandbox.files.write(path, data, request_timeout=self.request_timeout)

    def read(self, path: str) -> bytes:
        """Content of a file."""
        return bytes(
            self.sandbox.files.read(path, format="bytes", request_timeout=self.request_timeout)
        )

    def exists(self, path: str) -> bool:
        """True if the path exists."""
        return bool(self.sandbox.files.exists(path, request_timeout=self.request_timeout))

    def make_dir(self, path: str) -> None:
        """Create a directory with its parents (no error if it exists)."""
        self.sandbox.files.make_dir(path, request_timeout=self.request_timeout)

    def healthy(self) -> bool:
        """True if envd answers (False when the gateway says the sandbox is gone)."""
        return bool(self.sandbox.is_running(request_timeout=self.request_timeout))


def is_connect_error(exc: BaseException, *codes: str) -> bool:
    """True if ``exc`` is a Connect error with one of ``codes`` (any code if none given)."""
    if not isinstance(exc, e2b_connect.ConnectException):
        return False
    return not codes or exc.status.value in codes
