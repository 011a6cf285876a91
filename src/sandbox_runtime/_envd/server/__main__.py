"""``python -m ...envd``: serve the envd emulation on a TCP port of this machine.

The access token is read from the ``ENVD_ACCESS_TOKEN`` environment variable, or from the
file ``--token-file`` names, which is removed once read; never from the command line, where
every user of the machine could read it in ``ps``.  The in-sandbox agent uses the file: a
process's first environment stays readable in ``/proc/<pid>/environ`` (by processes of the
same user) whatever the process later unsets, so a token that must stay the agent's own
cannot travel there.  An agent that read its token from a file also makes itself
non-dumpable (see :func:`_keep_memory_private`).
"""

from __future__ import annotations

import argparse
import os
import socket
import sys

from ._limits import raise_open_files

# asyncio and the application are imported only once the port listens (see main): they are
# most of the agent's start, and a client may connect meanwhile.

#: Connections the kernel queues before the server takes them (see ``_http._BACKLOG``).
_BACKLOG = 4096


def _write_port(path: str, port: int) -> None:
    # Written to a temporary name first, so a reader never sees a half-written file.
    partial = f"{path}.partial"
    with open(partial, "w", encoding="ascii") as handle:
        handle.write(f"{port}\n")
    os.replace(partial, path)


def _take_token(path: str) -> str:
    """The token in ``path``, which is removed: once the agent runs, it is in no file."""
    with open(path, encoding="ascii") as handle:
        token = handle.read().strip()
    os.unlink(path)
    if not token:
        raise SystemExit(f"envd: {path} holds no token")
    return token


def _keep_memory_private() -> None:
    """Make this process non-dumpable (``prctl(PR_SET_DUMPABLE, 0)``), where Linux allows.

    Then its ``/proc/<pid>/environ``, ``mem`` and ``maps`` and ``ptrace`` are closed to
    processes of the same user that lack ``CAP_SYS_PTRACE``, as a container's processes do
    by default, root included: they cannot read the token from its memory.  The commands it
    starts are dumpable again, as every ``execve`` of a readable program makes them.  Best
    effort: no ``ctypes`` or no Linux, nothing changes.
    """
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE = 4
    except (ImportError, OSError, AttributeError):
        pass


def main(argv: list[str] | None = None, listener: socket.socket | None = None) -> int:
    """Parse arguments and serve until SIGTERM or SIGINT.

    ``listener``: a socket already listening (the in-sandbox agent's prewarmed starter binds
    its port before the agent's files arrive); else ``--host`` and ``--port`` are bound here.
    """
    parser = argparse.ArgumentParser(prog="envd", description="envd protocol emulation")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on")
    parser.add_argument("--port", type=int, default=49983, help="0 picks a free port")
    parser.add_argument("--port-file", help="write the bound port to this file when ready")
    parser.add_argument("--root", default="/", help="directory that stands for the sandbox's /")
    parser.add_argument("--workdir", default="/", help="base of relative paths")
    parser.add_argument(
        "--token-file", help="read the access token from this file, then remove the file"
    )
    parser.add_argument(
        "--keep-env",
        action="append",
        default=[],
        metavar="NAME",
        help="pass this variable of envd's own environment to every process (repeatable)",
    )
    parser.add_argument(
        "--exec-like",
        action="store_true",
        help="run processes as docker exec does: envd's own environment, their own session",
    )
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args(argv)
    token = os.environ.pop("ENVD_ACCESS_TOKEN", None)
    if args.token_file:
        token = _take_token(args.token_file)
        _keep_memory_private()
    # Listen first, import the rest after: a client that connects meanwhile (the backend's
    # readiness probe) waits in the backlog and is answered as soon as the server runs,
    # instead of being refused and trying again a probe interval later.
    return _serve(args, listener or _listen(args.host, args.port), token)


def _listen(host: str, port: int) -> socket.socket:
    """A TCP socket listening on ``host:port``.

    Made with its protocol named (``IPPROTO_TCP``): asyncio sets ``TCP_NODELAY`` only on
    connections whose socket says it is TCP, and without it every small answer waits for
    the client's delayed acknowledgement (40 ms).
    """
    family, kind, proto, _name, address = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP
    )[0]
    listener = socket.socket(family, kind, proto)
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(address)
        listener.listen(_BACKLOG)
    except BaseException:
        listener.close()
        raise
    return listener


def _serve(args: argparse.Namespace, listener: socket.socket, token: str | None) -> int:
    """Import the server, then serve on ``listener`` until SIGTERM or SIGINT."""
    import asyncio
    import contextlib
    import logging
    import signal

    from ._http import serve
    from .app import EnvdApp

    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.WARNING,
        format="envd %(levelname)s %(name)s: %(message)s",
    )
    raise_open_files()  # each running command holds four descriptors: see _limits
    app = EnvdApp(
        root=args.root,
        workdir=args.workdir,
        keep_env=tuple(args.keep_env),
        exec_like=args.exec_like,
    )
    if token:
        app.access_token = token

    def ready(port: int) -> None:
        if args.port_file:
            _write_port(args.port_file, port)
        print(f"envd listening on {args.host}:{port}", file=sys.stderr, flush=True)

    async def run() -> None:
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        assert task is not None
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, task.cancel)
        await serve(app, sock=listener, on_ready=ready)

    with contextlib.suppress(asyncio.CancelledError, KeyboardInterrupt):
        asyncio.run(run())
    app.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
