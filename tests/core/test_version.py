"""One version number for the library and its emulators, written in one place.

``sandbox_runtime.__version__`` is the source: both ``pyproject.toml`` files read their
version from their package's ``__version__``, and the emulators (released from this
repository with the library, serving its envd server) pin exactly that library version.
A bump that misses one of them ships a pair of wheels that cannot be installed together.
"""

from __future__ import annotations

import importlib.metadata
import sys
from pathlib import Path
from typing import Any

from packaging.requirements import Requirement

import sandbox_runtime
import sandbox_runtime_emulators

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib  # type: ignore[import-not-found,unused-ignore]

ROOT = Path(__file__).resolve().parents[2]


def _pyproject(directory: Path) -> dict[str, Any]:
    data: dict[str, Any] = tomllib.loads((directory / "pyproject.toml").read_text("utf-8"))
    return data


def test_the_installed_library_is_this_version() -> None:
    """Fails after a bump until the checkout is installed again (its metadata is stale)."""
    assert importlib.metadata.version("sandbox-runtime-swe") == sandbox_runtime.__version__


def test_the_emulators_carry_the_library_s_version() -> None:
    assert sandbox_runtime_emulators.__version__ == sandbox_runtime.__version__
    try:
        installed = importlib.metadata.version("sandbox-runtime-emulators")
    except importlib.metadata.PackageNotFoundError:  # imported from the checkout's tree
        return
    assert installed == sandbox_runtime_emulators.__version__


def test_the_emulators_pin_exactly_this_library_version() -> None:
    dependencies = _pyproject(ROOT / "emulators")["project"]["dependencies"]
    pins = [Requirement(text) for text in dependencies]
    library = [pin for pin in pins if pin.name == "sandbox-runtime-swe"]
    assert len(library) == 1, dependencies
    assert str(library[0].specifier) == f"=={sandbox_runtime.__version__}"


def test_each_distribution_reads_its_version_from_its_package() -> None:
    """No second, static ``version =`` that a bump could miss."""
    for directory, package in (
        (ROOT, "sandbox_runtime"),
        (ROOT / "emulators", "sandbox_runtime_emulators"),
    ):
        config = _pyproject(directory)
        assert "version" not in config["project"]
        assert "version" in config["project"]["dynamic"]
        dynamic = config["tool"]["setuptools"]["dynamic"]["version"]
        assert dynamic == {"attr": f"{package}.__version__"}
