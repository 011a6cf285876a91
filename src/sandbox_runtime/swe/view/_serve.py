"""Serve a run's page on the loopback address, for runs too large to inline in one file.

The page is the same as ``--html`` writes, without the data; the script fetches
``data.json`` from the same origin.  Two fixed paths, nothing read from disk per request,
bound to 127.0.0.1 unless the caller asks otherwise: a report's contents (command output,
patches) are not for the network.
"""

from __future__ import annotations

from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from sandbox_runtime.swe.view._html import data_json, render_page

__all__ = ["make_server"]


def make_server(
    data: dict[str, Any], host: str = "127.0.0.1", port: int = 0
) -> ThreadingHTTPServer:
    """A server (not yet serving) answering ``/`` with the page and ``/data.json`` with the data."""
    names = " vs ".join(run["name"] for run in data["runs"])
    bodies = {
        "/": (render_page(None, title=f"sandbox-runtime: {names}").encode(), "text/html"),
        "/data.json": (data_json(data).encode(), "application/json"),
    }

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            body, kind = bodies.get("/" if path == "/index.html" else path, (b"not found\n", ""))
            self.send_response(200 if kind else 404)
            self.send_header("Content-Type", (kind or "text/plain") + "; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # a page view is not worth a log line

    return ThreadingHTTPServer((host, port), Handler)
