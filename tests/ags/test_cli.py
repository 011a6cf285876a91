"""``sandbox-runtime ags emulator`` in a subprocess, used through exported variables only."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from tests.ags.conftest import isolation


def test_emulator_command_serves_the_ags_backend() -> None:
    command = [
        sys.executable,
        "-m",
        "sandbox_runtime.cli",
        "ags",
        "emulator",
        "--port",
        "0",
        "--local-isolation",
        isolation(),
    ]
    server = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        exports: dict[str, str] = {}
        deadline = time.monotonic() + 30
        while "E2B_SANDBOX_URL" not in exports and time.monotonic() < deadline:
            line = server.stdout.readline()
            if line.startswith("export "):
                name, _, value = line.removeprefix("export ").strip().partition("=")
                exports[name] = value
        assert exports["AGS_ENDPOINT"].startswith("http://127.0.0.1:")
        env = {**os.environ, **exports}
        ran = subprocess.run(
            [
                sys.executable,
                "-m",
                "sandbox_runtime.cli",
                "exec",
                "--backend",
                "ags",
                "--workdir",
                "/tmp",
                "--",
                "sh",
                "-c",
                "pwd; exit 3",
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert (ran.returncode, ran.stdout) == (3, "/tmp\n"), ran.stderr
    finally:
        server.terminate()
        server.wait(timeout=60)
    assert server.returncode == 0
