"""The in-sandbox agent's zip: compiled modules for this interpreter, sources for any other."""

from __future__ import annotations

import io
import subprocess
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path

from sandbox_runtime._envd.agent import _agent_zip


def _rewritten(transform: Callable[[str, bytes], bytes]) -> bytes:
    """The agent's zip with each member's bytes passed through ``transform(name, data)``."""
    buffer = io.BytesIO()
    with (
        zipfile.ZipFile(io.BytesIO(_agent_zip())) as source,
        zipfile.ZipFile(buffer, "w") as target,
    ):
        for name in source.namelist():
            target.writestr(name, transform(name, source.read(name)))
    return buffer.getvalue()


def _runs(archive: bytes, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "agent.zip"
    path.write_bytes(archive)
    return subprocess.run(
        [sys.executable, "-E", "-s", str(path), "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_every_module_ships_as_source_and_compiled() -> None:
    names = set(zipfile.ZipFile(io.BytesIO(_agent_zip())).namelist())
    sources = {name for name in names if name.endswith(".py") and name != "__main__.py"}
    assert sources
    assert {name + "c" for name in sources} <= names


def test_an_interpreter_of_this_version_uses_the_compiled_modules(tmp_path: Path) -> None:
    # Sources that cannot compile: the agent still starts, so it never compiled them.
    def broken_sources(name: str, data: bytes) -> bytes:
        return b"this is not python(\n" if name.endswith(".py") and "/" in name else data

    done = _runs(_rewritten(broken_sources), tmp_path)
    assert done.returncode == 0, done.stderr
    assert "--exec-like" in done.stdout


def test_another_version_ignores_the_compiled_modules_and_compiles_the_sources(
    tmp_path: Path,
) -> None:
    # A foreign magic number is what an image's python3 of another version sees.
    def foreign_magic(name: str, data: bytes) -> bytes:
        return b"\x00\x00\r\n" + data[4:] if name.endswith(".pyc") else data

    done = _runs(_rewritten(foreign_magic), tmp_path)
    assert done.returncode == 0, done.stderr
    assert "--exec-like" in done.stdout

    # And the sources are what ran: broken ones now fail the start.
    def both(name: str, data: bytes) -> bytes:
        data = foreign_magic(name, data)
        return b"this is not python(\n" if name.endswith(".py") and "/" in name else data

    assert _runs(_rewritten(both), tmp_path).returncode != 0
