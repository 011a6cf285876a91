"""An OpenAI-compatible chat server that plays the bundled tasks by script (no model, no GPU).

``python scripted_server.py --mode gold --port 8321`` answers ``/v1/chat/completions`` in
R2E-Gym's text protocol, as a model trained on R2E-Gym writes it:

* ``gold``: first reply applies the task's reference fix with ``execute_bash`` (the diff
  base64-encoded, piped to ``patch -p1``), the second calls ``finish``;
* ``null``: the first reply calls ``finish`` (nothing changed: the tests must give 0).

The task is recognised by its issue text in the first user message (the bundled R2E-Gym and
SWE-bench rows of one sample share issue and fix); the step is the number of assistant
messages so far, so the server keeps no state and any number of rollouts may run at once.
rLLM's gateway sits between the flow and this server, as it would in front of vLLM.
"""

from __future__ import annotations

import argparse
import base64
import json
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from sandbox_runtime.swe import read_rows
from sandbox_runtime.swe.dataset import load_rows
from sandbox_runtime.swe.parquet import issue_text

FINISH = "<function=finish>\n</function>"


def gold_patches() -> dict[str, str]:
    """Issue text -> reference fix, for every bundled task."""
    return {
        issue_text(task).strip(): task.gold_patch for task in read_rows(load_rows("bundled")).tasks
    }


def reply_for(messages: list[dict[str, Any]], mode: str, patches: dict[str, str]) -> str:
    """The scripted assistant text for this point of the conversation."""
    step = sum(1 for message in messages if message.get("role") == "assistant")
    if mode == "null" or step > 0:
        return "Done." + "\n" + FINISH
    first_user = next(str(m.get("content", "")) for m in messages if m.get("role") == "user")
    patch = next((p for issue, p in patches.items() if issue and issue in first_user), None)
    if patch is None:
        return "I do not know this task.\n" + FINISH
    encoded = base64.b64encode(patch.encode()).decode()
    return (
        "Applying the fix.\n<function=execute_bash>\n"
        f"<parameter=cmd>echo {encoded} | base64 -d | patch -p1</parameter>\n</function>"
    )


def serve(mode: str, port: int) -> None:
    patches = gold_patches()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            # rLLM's gateway probes GET <worker>/health every 10 s and stops routing to a
            # worker that fails it; /v1/models is what OpenAI clients list.
            payload = json.dumps({"object": "list", "data": [{"id": "scripted"}]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            text = reply_for(body.get("messages", []), mode, patches)
            payload = json.dumps(
                {
                    "id": f"chatcmpl-{time.monotonic_ns()}",
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": body.get("model", "scripted"),
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": text},
                            "finish_reason": "stop",
                        }
                    ],
                    "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
                }
            ).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    print(f"scripted {mode} server on http://127.0.0.1:{port}/v1", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=("gold", "null"), required=True)
    parser.add_argument("--port", type=int, default=8321)
    args = parser.parse_args()
    serve(args.mode, args.port)
