"""The layer map in ``pyproject.toml`` holds, covers every module, and catches a violation.

It also keeps the package's root a map of the layers: a handful of public modules, the rest
private.
"""

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
EMULATORS = ROOT / "emulators" / "src" / "sandbox_runtime_emulators"
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")
#: Packages that are layers of their own (each named by a contract); everything else at the
#: package's top level is the core.
LAYER_PACKAGES = {"backends", "swe", "integrations", "cli"}
#: The public modules at the root: the error tree, the backend toolkit and the layers.
PUBLIC_AT_ROOT = {"errors", "backend_kit", "backends", "swe", "integrations", "cli"}


def _contracts() -> list[dict[str, object]]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    contracts: list[dict[str, object]] = config["tool"]["importlinter"]["contracts"]
    return contracts


def _lint_imports(src: Path, config: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(LINT_IMPORTS), "--config", str(config), "--no-cache"],
        cwd=src.parent,
        env={"PYTHONPATH": f"{src}:{src.parent / 'emulators'}", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _root_modules() -> set[str]:
    return {
        path.stem if path.is_file() else path.name
        for path in PACKAGE.iterdir()
        if (path.suffix == ".py" and path.name != "__init__.py")
        or (path.is_dir() and (path / "__init__.py").exists())
    }


def test_every_core_module_is_under_the_core_contract() -> None:
    core = next(c for c in _contracts() if str(c["name"]).startswith("The core"))
    listed = {str(m).removeprefix("sandbox_runtime.") for m in core["source_modules"]}  # type: ignore[attr-defined]
    on_disk = _root_modules()
    assert on_disk - LAYER_PACKAGES - listed == set(), "add new core modules to the contract"
    assert listed <= on_disk


def test_the_root_has_at_most_eight_public_modules() -> None:
    public = {name for name in _root_modules() if not name.startswith("_")}
    assert public == PUBLIC_AT_ROOT, "a new public module at the root: make it private or say why"
    assert len(public) <= 8


#: Public parts of a backend package beyond its ``__init__``: AGS tool management, a Python
#: API documented in docs/ags.md (tools, instances, image sync), which is not transport.
PUBLIC_IN_BACKENDS = {"ags": {"manage"}}


def test_every_built_in_backend_has_the_same_layout() -> None:
    backends = sorted(p for p in (PACKAGE / "backends").iterdir() if (p / "__init__.py").is_file())
    expected = ["ags", "docker", "e2b", "kubernetes", "local", "repoenv", "spread"]
    assert [p.name for p in backends] == expected
    for package in backends:
        public = {
            p.stem
            for p in package.iterdir()
            if not p.name.startswith("_") and (p.suffix == ".py" or (p / "__init__.py").is_file())
        }
        assert public == PUBLIC_IN_BACKENDS.get(package.name, set()), package.name
        for required in ("__init__.py", "_backend.py", "_options.py"):
            assert (package / required).is_file(), f"{package.name} lacks {required}"


@pytest.mark.parametrize(
    ("module", "line", "contract"),
    [
        ("backends/docker/_backend.py", "import sandbox_runtime.swe.grading", "A backend imports"),
        ("backends/local/_backend.py", "import sandbox_runtime._core.runtime", "A backend imports"),
        ("_core/runtime.py", "import sandbox_runtime.backends.local", "The core imports no"),
        ("swe/runner.py", "import sandbox_runtime.backends.docker", "The SWE layer names no"),
        ("_core/results.py", "import sandbox_runtime._core.runtime", "No import circles"),
        ("_core/runtime.py", "import sandbox_runtime_emulators", "The library never imports"),
    ],
)
def test_a_violation_breaks_its_contract(
    tmp_path: Path, module: str, line: str, contract: str
) -> None:
    src = tmp_path / "src"
    shutil.copytree(PACKAGE, src / "sandbox_runtime", ignore=shutil.ignore_patterns("bundled"))
    shutil.copytree(EMULATORS, tmp_path / "emulators" / "sandbox_runtime_emulators")
    target = src / "sandbox_runtime" / module
    # A lazy import inside a function is a dependency too.
    target.write_text(
        target.read_text(encoding="utf-8") + f"\n\ndef _sneaky() -> None:\n    {line}\n",
        encoding="utf-8",
    )
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    result = _lint_imports(src, tmp_path / "pyproject.toml")
    assert result.returncode != 0
    broken = result.stdout.partition("Broken contracts")[2]
    assert contract in broken, result.stdout
