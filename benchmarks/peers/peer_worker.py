"""A peer library's side of bench_peers.py, run in that peer's own virtualenv.

Usage (by bench_peers.py): ``<peer venv>/bin/python peer_worker.py KIND IMAGE``, where KIND
is ``mini``, ``swerex`` or ``swerex-session``.  It
starts one sandbox to run the per-command operations in, then reads one JSON request per line
(``{"op": ..., "sandboxes": n, "execs": k}``) and answers each with one ``BENCH {json}`` line
from ``peer_ops.handle``: the peer times itself, so no pipe hop is in its figures.  Its first
line, once that sandbox is up, is ``BENCH {"version": ...}`` (the peer's release).

- ``mini``: mini-swe-agent's ``DockerEnvironment`` (``docker run -d`` once, then ``docker
  exec`` through the CLI per command); commands run with ``bash -c`` as everyone's do (its
  default is a login shell, ``bash -lc``).  It has no file API: its agents write files with
  shell commands, which cannot carry 1 MB in one argument, so the file round trip is n/a.
- ``swerex``: SWE-ReX's ``DockerDeployment`` (``docker run`` of an image with its server,
  then HTTP to the published port) and the runtime's ``execute`` (a subprocess per command,
  independent of a shell session), ``write_file`` and ``read_file`` (text).  Each sandbox owns
  an event loop, so the fan-out's threads drive their deployments as independent callers do.
- ``swerex-session``: the same deployment, commands run in one bash session instead
  (``run_in_session``), the way SWE-agent uses SWE-ReX; see ``SwerexSessionBox``.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import json
import logging
import sys
from collections.abc import Coroutine
from typing import Any, TypeVar

from peer_ops import Box, Starter, Unsupported, handle

T = TypeVar("T")


class MiniBox:
    """A mini-swe-agent DockerEnvironment."""

    def __init__(self, image: str) -> None:
        from minisweagent.environments.docker import DockerEnvironment

        self._env = DockerEnvironment(image=image, cwd="/", interpreter=["bash", "-c"])

    def run(self, command: str, cwd: str | None = None) -> tuple[int, bytes]:
        result = self._env.execute({"command": command}, cwd=cwd or "")
        return int(result["returncode"]), str(result["output"]).encode()

    def write(self, path: str, data: bytes) -> None:
        raise Unsupported("mini-swe-agent has no file API (its agents write files with commands)")

    def read(self, path: str) -> bytes:
        raise Unsupported("mini-swe-agent has no file API")

    def close(self) -> None:
        # Returns at once: the container is stopped by a background `docker stop`.
        self._env.cleanup()


class SwerexBox:
    """A SWE-ReX DockerDeployment and its remote runtime, on an event loop of its own."""

    def __init__(self, image: str) -> None:
        from swerex.deployment.docker import DockerDeployment

        self._loop = asyncio.new_event_loop()
        self._deployment = DockerDeployment(image=image, pull="never")
        self._call(self._deployment.start())

    def _call(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return self._loop.run_until_complete(coroutine)

    def run(self, command: str, cwd: str | None = None) -> tuple[int, bytes]:
        from swerex.runtime.abstract import Command

        # An argument vector, not shell=True: that would be /bin/sh (dash), not bash.
        request = Command(command=["bash", "-c", command], cwd=cwd)
        response = self._call(self._deployment.runtime.execute(request))
        return int(response.exit_code), str(response.stdout).encode()

    def write(self, path: str, data: bytes) -> None:
        from swerex.runtime.abstract import WriteFileRequest

        request = WriteFileRequest(path=path, content=data.decode())
        self._call(self._deployment.runtime.write_file(request))

    def read(self, path: str) -> bytes:
        from swerex.runtime.abstract import ReadFileRequest

        response = self._call(self._deployment.runtime.read_file(ReadFileRequest(path=path)))
        return str(response.content).encode()

    def close(self) -> None:
        try:
            self._call(self._deployment.stop())
        finally:
            self._loop.close()


class SwerexSessionBox(SwerexBox):
    """SWE-ReX as SWE-agent drives it: one bash session (a pty) that every command runs in.

    The session is part of the start.  Its shell is interactive on a terminal, so ``git diff``
    and the like would wait in a pager: ``PAGER=cat`` is exported first, as SWE-agent does.
    Output comes back through the terminal, stderr mixed in.
    """

    def __init__(self, image: str) -> None:
        from swerex.runtime.abstract import CreateBashSessionRequest

        super().__init__(image)
        self._cwd: str | None = None
        self._call(self._deployment.runtime.create_session(CreateBashSessionRequest()))
        self._in_session("export PAGER=cat GIT_PAGER=cat")

    def _in_session(self, command: str) -> tuple[int, bytes]:
        from swerex.runtime.abstract import BashAction

        action = BashAction(command=command, check="silent", timeout=120)
        observation = self._call(self._deployment.runtime.run_in_session(action))
        return int(observation.exit_code), str(observation.output).encode()

    def run(self, command: str, cwd: str | None = None) -> tuple[int, bytes]:
        # The session keeps its directory, as an agent's does; a command without one (the
        # rollout's setup, which recreates the repository) makes the next one cd again.
        if cwd is not None and cwd != self._cwd:
            self._in_session(f"cd {cwd}")
        self._cwd = cwd
        return self._in_session(command)


def starter(kind: str, image: str) -> Starter:
    boxes: dict[str, type[MiniBox] | type[SwerexBox]] = {
        "mini": MiniBox,
        "swerex": SwerexBox,
        "swerex-session": SwerexSessionBox,
    }
    box_type = boxes[kind]

    def start() -> Box:
        return box_type(image)

    return start


def main() -> None:
    kind, image = sys.argv[1], sys.argv[2]
    logging.disable(logging.CRITICAL)  # both peers log to the terminal by default
    start = starter(kind, image)
    box = start()
    distribution = "mini-swe-agent" if kind == "mini" else "swe-rex"
    print("BENCH " + json.dumps({"version": importlib.metadata.version(distribution)}), flush=True)
    try:
        for line in sys.stdin:
            request = json.loads(line)
            answer = handle(
                request["op"], start, box, request.get("sandboxes", 0), request.get("execs", 0)
            )
            print("BENCH " + json.dumps(answer), flush=True)
    finally:
        box.close()


if __name__ == "__main__":
    main()
