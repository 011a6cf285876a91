"""The local backend's isolation default and each sandbox's own Python environment (issue 29)."""

from __future__ import annotations

import importlib
import json
import logging
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from sandbox_runtime import SandboxConfig, SandboxRuntime
from sandbox_runtime.backends.local import _backend
from sandbox_runtime.errors import BackendUnavailableError
from tests.conftest import bwrap_problem, require


def _config(tmp_path: Path, **options: object) -> SandboxConfig:
    return SandboxConfig(
        backend="local", workdir="/testbed", options={"base_dir": tmp_path / "sbx", **options}
    )


def test_unset_isolation_is_namespace_where_bubblewrap_works(tmp_path: Path) -> None:
    require(bwrap_problem())
    with SandboxRuntime(_config(tmp_path)) as sandbox:
        assert sandbox.backend.options.isolation == "namespace"
        assert sandbox.exec("pwd").stdout == "/testbed\n"


def test_without_bubblewrap_unset_falls_back_once_and_asked_for_fails(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    missing = str(tmp_path / "no-such-bwrap")
    monkeypatch.setattr(_backend, "_fallback_warned", set())
    with caplog.at_level(logging.WARNING, logger="sandbox_runtime.local"):
        for _ in range(2):
            with SandboxRuntime(_config(tmp_path, bwrap_path=missing)) as sandbox:
                assert sandbox.backend.options.isolation == "none"
    said = [r.getMessage() for r in caplog.records if "isolation=none" in r.getMessage()]
    assert len(said) == 1, said
    assert "not found (install bubblewrap" in said[0]
    assert "\n" not in said[0]
    with pytest.raises(BackendUnavailableError, match="not found"):
        SandboxRuntime(_config(tmp_path, bwrap_path=missing, isolation="namespace")).start()


def test_installs_and_scripts_use_the_sandboxs_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``pip`` and ``pytest`` run the sandbox's interpreter; pip's ways out are closed.

    ``yaml`` is installed in this test run's venv; a package of the same name installed
    editable in the sandbox (a flat layout, whose import finder setuptools appends after the
    path finder) is the one imported, from any directory.  On ``isolation="none"``, where a
    write outside the sandbox would reach the host (namespace isolation: tests/swe/
    test_local_grading.py).
    """
    isolation = "none"
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("PIP_USER", "1")
    monkeypatch.setenv("PIP_TARGET", str(tmp_path / "host-target"))
    with SandboxRuntime(_config(tmp_path, isolation=isolation)) as sandbox:
        sandbox.write_text(
            "setup.py",
            "from setuptools import setup\n"
            'setup(name="yaml-here", version="1", packages=["yaml"])\n',
        )
        sandbox.write_text("yaml/__init__.py", "HERE = True\n")
        shown = sandbox.exec(
            "for t in python pip pytest; do command -v $t; done; "
            'echo "$VIRTUAL_ENV ${PIP_USER:-} ${PIP_TARGET:-unset}"',
            env={"PATH": os.environ["PATH"]},  # a PATH given still gets the sandbox's bin first
        ).stdout.splitlines()
        venv = shown[-1].split()[0]
        assert venv.endswith("/.sandbox-runtime/python")
        assert all(line.startswith(venv + "/bin/") for line in shown[:3]), shown
        assert shown[-1].split()[1:] == ["0", "unset"]
        installed = sandbox.exec(
            "python -m pip install -q --no-build-isolation --no-deps -e . 2>&1", timeout=300
        )
        assert installed.ok, installed.output
        where = sandbox.exec(
            "cd / && python -c 'import yaml; print(yaml.__file__)' && "
            "pytest --version >/dev/null && pip --version",
        )
        assert where.ok, where.output
        assert where.stdout.splitlines()[0].endswith("/testbed/yaml/__init__.py"), where.stdout
    assert not (tmp_path / "host-target").exists()
    assert not hasattr(importlib.import_module("yaml"), "HERE")  # the host's is untouched


_PATH_PRINT = "import json, sys; print(json.dumps(sys.path))"


@pytest.mark.parametrize("system_site", [False, True], ids=["venv", "system-site-venv"])
def test_the_sandbox_python_sees_the_folders_the_host_python_sees(
    system_site: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No more than the host's ``python``: a venv without the base site-packages hides them.

    Before, every sandbox saw the base interpreter's site-packages, so pytest there loaded
    plugins the host's own test run never sees (hypothesis's: 1.4 s of every pytest run here).
    """
    python = Path(sys.executable)
    if system_site:
        venv = tmp_path / "venv"
        made = subprocess.run(
            [sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", str(venv)],
            capture_output=True,
            text=True,
            check=False,
        )
        assert made.returncode == 0, made.stderr
        python = venv / "bin" / "python"
    monkeypatch.setenv("PATH", f"{python.parent}{os.pathsep}{os.environ['PATH']}")
    host = subprocess.run(
        [str(python), "-c", _PATH_PRINT], capture_output=True, text=True, check=True
    )
    host_path = [p for p in json.loads(host.stdout) if p]
    with SandboxRuntime(_config(tmp_path, isolation="none")) as sandbox:
        seen = sandbox.exec(f"cd / && python -c {shlex.quote(_PATH_PRINT)}", check=True)
        backend = sandbox.backend
        assert isinstance(backend, _backend.LocalBackend)
        own = f"{backend.root}/.sandbox-runtime/"
    sandbox_path = [p for p in json.loads(seen.stdout) if p and not p.startswith(own)]
    assert sandbox_path == host_path
