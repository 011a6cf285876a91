"""The "persistent in-container agent" floor of bench_peers.py: the least a server can do.

bench_peers.py starts this inside the container with ``docker exec -d python3 -c <source>``
and talks to it over the container's IP.  Per request it forks ``bash -c`` and sends the
output back, with no framing beyond one JSON header line each way, no authentication, no
timeouts, no streaming, no process groups: a physical floor for "a server in the sandbox"
(one TCP round trip plus one bash), not something to run agents on.

Request: ``{"command": str, "cwd": str | null, "stdin": n}`` line, then ``n`` bytes of stdin.
Answer: ``{"exit": int, "stdout": n, "stderr": m}`` line, then the ``n + m`` bytes.
Standard library only: it runs with the image's own python3.
"""

from __future__ import annotations

import json
import socket
import socketserver
import subprocess

PORT = 7071


class Handler(socketserver.StreamRequestHandler):
    """Serve requests on one connection until the client closes it."""

    def setup(self) -> None:
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def handle(self) -> None:
        for line in self.rfile:
            request = json.loads(line)
            stdin = self.rfile.read(request["stdin"])
            done = subprocess.run(
                ["bash", "-c", request["command"]],
                input=stdin,
                cwd=request["cwd"],
                capture_output=True,
                check=False,
            )
            header = {
                "exit": done.returncode,
                "stdout": len(done.stdout),
                "stderr": len(done.stderr),
            }
            self.wfile.write(json.dumps(header).encode() + b"\n" + done.stdout + done.stderr)


class Server(socketserver.ThreadingTCPServer):
    allow_reuse_address = True
    daemon_threads = True


if __name__ == "__main__":
    Server(("0.0.0.0", PORT), Handler).serve_forever()
