"""The layer map in ``pyproject.toml`` holds, covers every module, and catches a violation."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib  # type: ignore[import-not-found,unused-ignore]

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "src" / "sandbox_runtime"
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")
#: Packages that are layers of their own (each named by a contract); everything else at the
#: package's top level is the core.
LAYER_PACKAGES = {"backends", "swe", "integrations", "ags", "emulators", "cli"}


def _contracts() -> list[dict[str, object]]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    contracts: list[dict[str, object]] = config["tool"]["importlinter"]["contracts"]
    return contracts


def _lint_imports(src: Path, config: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(LINT_IMPORTS), "--config", str(config), "--no-cache"],
        cwd=src.parent,
        env={"PYTHONPATH": str(src), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_every_core_module_is_under_the_core_contract() -> None:
    core = next(c for c in _contracts() if str(c["name"]).startswith("The core"))
    listed = {str(m).removeprefix("sandbox_runtime.") for m in core["source_modules"]}  # type: ignore[attr-defined]
    on_disk = {
        path.stem if path.is_file() else path.name
        for path in PACKAGE.iterdir()
        if (path.suffix == ".py" and path.name != "__init__.py")
        or (path.is_dir() and (path / "__init__.py").exists())
    }
    assert on_disk - LAYER_PACKAGES - listed == set(), "add new core modules to the contract"
    assert listed <= on_disk


def test_the_contracts_hold() -> None:
    result = _lint_imports(ROOT / "src", ROOT / "pyproject.toml")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


@pytest.mark.parametrize(
    ("module", "line", "contract"),
    [
        ("backends/docker.py", "import sandbox_runtime.swe.grading", "A backend imports only"),
        ("runtime.py", "import sandbox_runtime.backends.local", "The core imports no backend"),
        ("swe/runner.py", "import sandbox_runtime.backends.docker", "The SWE layer names no"),
    ],
)
def test_a_violation_breaks_its_contract(
    tmp_path: Path, module: str, line: str, contract: str
) -> None:
    src = tmp_path / "src"
    shutil.copytree(PACKAGE, src / "sandbox_runtime", ignore=shutil.ignore_patterns("bundled"))
    target = src / "sandbox_runtime" / module
    # A lazy import inside a function is a dependency too.
    target.write_text(
        target.read_text(encoding="utf-8") + f"\n\ndef _sneaky() -> None:\n    {line}\n",
        encoding="utf-8",
    )
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    result = _lint_imports(src, tmp_path / "pyproject.toml")
    assert result.returncode != 0
    assert f"{contract}" in result.stdout
    assert "BROKEN" in result.stdout
