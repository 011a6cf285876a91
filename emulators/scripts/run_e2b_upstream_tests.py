r"""Run e2b's own Python SDK tests (unmodified) against a local AGS emulator.

Usage (the tests' interpreter needs e2b, pytest, pytest-asyncio, pytest-timeout)::

    PYTHONPATH=src:emulators/src python emulators/scripts/run_e2b_upstream_tests.py \\
        --tests /path/to/E2B/packages/python-sdk --python /path/to/venv/bin/python \\
        sync/sandbox_sync/test_fork.py ...

The emulator runs in this process with local-sandbox instances and a ready tool named
``base`` (the template e2b's tests ask for); the tests reach it through the SDK's own
variables (``E2B_API_KEY``, ``E2B_API_URL``, ``E2B_SANDBOX_URL``).  Nothing is patched.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

from sandbox_runtime_emulators.ags.server import AgsEmulator


def main() -> int:
    """Start the emulator, run pytest in the SDK's test tree, return pytest's exit code."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--tests", required=True, help="e2b's packages/python-sdk directory")
    parser.add_argument("--python", required=True, help="interpreter with e2b and pytest")
    parser.add_argument("--backend", default="local", help="how instances run (local, docker)")
    parser.add_argument("--image", help="image of the 'base' tool (docker instances need one)")
    parser.add_argument("files", nargs="+", help="test files, relative to tests/")
    parser.add_argument("--pytest-args", default="-q -p no:cacheprovider", help="more options")
    args = parser.parse_args()
    with AgsEmulator(backend=args.backend, default_image=args.image) as emulator:
        emulator.service.add_ready_tool("base", args.image)
        env = {
            **os.environ,
            "E2B_API_KEY": emulator.api_key,
            "E2B_API_URL": emulator.url,
            "E2B_SANDBOX_URL": emulator.url,
        }
        env.pop("E2B_DEBUG", None)
        command = [
            args.python,
            "-m",
            "pytest",
            *args.pytest_args.split(),
            *(f"tests/{name}" for name in args.files),
        ]
        return subprocess.run(command, cwd=args.tests, env=env, check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
