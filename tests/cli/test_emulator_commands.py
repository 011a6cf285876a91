"""The emulators are a distribution of their own, found by the library's CLI when installed.

The library's wheel is built and installed into a fresh virtualenv, as a user gets it with
``pip install .``: it holds no emulator module, and its ``emulator`` commands say in one line
what to install (exit code 2).  With ``sandbox-runtime-emulators`` installed (the test
virtualenv has it), the same commands and ``sandbox-runtime-emulator`` serve the emulators;
``tests/ags/test_cli.py`` and ``tests/backends/test_kubernetes.py`` start them that way.
"""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


def _run(*command: str | Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(part) for part in command],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@pytest.fixture(scope="module")
def library_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    wheels = tmp_path_factory.mktemp("wheels")
    built = _run(sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", wheels, ROOT)
    assert built.returncode == 0, built.stderr
    return next(wheels.glob("sandbox_runtime_swe-*.whl"))


@pytest.fixture(scope="module")
def library_only(tmp_path_factory: pytest.TempPathFactory, library_wheel: Path) -> Path:
    """A virtualenv with the library alone: its ``bin`` folder."""
    venv = tmp_path_factory.mktemp("library-only") / "venv"
    assert _run(sys.executable, "-m", "venv", venv).returncode == 0
    installed = _run(
        venv / "bin" / "python",
        "-m",
        "pip",
        "install",
        "--quiet",
        "--disable-pip-version-check",
        library_wheel,
    )
    assert installed.returncode == 0, installed.stderr
    return venv / "bin"


def test_the_library_wheel_holds_no_emulator(library_wheel: Path) -> None:
    with zipfile.ZipFile(library_wheel) as wheel:
        names = wheel.namelist()
    tops = {name.split("/", 1)[0] for name in names}
    assert tops == {"sandbox_runtime", library_wheel.name.split("-py")[0] + ".dist-info"}
    assert not [name for name in names if "/emulators/" in name]
    assert "sandbox_runtime/_envd/server/app.py" in names  # the agent's server stays


@pytest.mark.parametrize(("group", "title"), [("ags", "AGS"), ("kubernetes", "Kubernetes")])
def test_without_the_emulators_the_command_says_what_to_install(
    library_only: Path, group: str, title: str
) -> None:
    ran = _run(library_only / "sandbox-runtime", group, "emulator", "--port", "0", timeout=60)
    assert ran.returncode == 2
    assert ran.stdout == ""
    assert ran.stderr.count("\n") == 1, ran.stderr
    assert ran.stderr.startswith(f"sandbox-runtime: the {title} emulator is not installed: ")
    assert "pip install ./emulators" in ran.stderr
    gone = _run(library_only / "python", "-c", "import sandbox_runtime_emulators", timeout=60)
    assert "No module named 'sandbox_runtime_emulators'" in gone.stderr


def test_the_library_alone_runs_a_sandbox(library_only: Path) -> None:
    ran = _run(
        library_only / "sandbox-runtime",
        "exec",
        "--backend",
        "local",
        "--",
        "echo",
        "hi",
        timeout=120,
    )
    assert (ran.returncode, ran.stdout) == (0, "hi\n"), ran.stderr


def test_installed_emulators_give_both_commands() -> None:
    bin_dir = Path(sys.executable).parent
    own = _run(bin_dir / "sandbox-runtime-emulator", "--help", timeout=60)
    assert own.returncode == 0, own.stderr
    listed = [
        line.split()[0]
        for line in own.stdout.splitlines()
        if line.startswith("    ") and line[4:5].isalpha()
    ]
    assert listed[:2] == ["ags", "kubernetes"], own.stdout
    for group, flag in (("ags", "--tcr-domain"), ("kubernetes", "--offline-images")):
        library = _run(bin_dir / "sandbox-runtime", group, "emulator", "--help", timeout=60)
        assert library.returncode == 0, library.stderr
        assert flag in library.stdout
        direct = _run(bin_dir / "sandbox-runtime-emulator", group, "--help", timeout=60)
        assert flag in direct.stdout


def test_a_bad_emulator_flag_is_a_usage_error() -> None:
    ran = _run(
        Path(sys.executable).parent / "sandbox-runtime-emulator",
        "kubernetes",
        "--rate-limit",
        "nonsense",
        timeout=60,
    )
    assert ran.returncode == 2
    assert ran.stderr.startswith("sandbox-runtime-emulator: "), ran.stderr
    assert ran.stderr.count("\n") == 1
