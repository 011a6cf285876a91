"""Fixtures for the AGS tests: one emulator per module, and helpers to reach it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.conftest import bwrap_problem, require

try:
    import e2b  # noqa: F401
except ImportError:  # pragma: no cover - fails in CI, skips elsewhere
    require("needs the ags extra: pip install -e '.[ags,ags-emulator]'")

from sandbox_runtime.emulators.ags.server import AgsEmulator


def isolation() -> str:
    """Namespace isolation where bubblewrap works (absolute paths agree), else none."""
    return "namespace" if bwrap_problem() is None else "none"


@pytest.fixture(scope="module")
def emulator() -> Iterator[AgsEmulator]:
    """A running emulator whose instances are local sandboxes."""
    with AgsEmulator(backend="local", local_isolation=isolation()) as running:
        yield running


@pytest.fixture(autouse=True)
def _clean_faults(emulator: AgsEmulator) -> Iterator[None]:
    emulator.faults.clear()
    yield
    emulator.faults.clear()
