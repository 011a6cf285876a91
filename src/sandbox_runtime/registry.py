"""Finding backends: the ``sandbox_runtime.backends`` entry-point group, or a dotted path.

Built-in backends are registered in this project's ``pyproject.toml`` exactly as a third
party would register its own, so there is one way in.  Backend modules are imported only
when a sandbox of that backend is opened: listing backends imports nothing.
"""

from __future__ import annotations

import importlib
import threading
from dataclasses import dataclass
from importlib import metadata

from sandbox_runtime.backend import Backend
from sandbox_runtime.errors import BackendNotFoundError, BackendUnavailableError

__all__ = ["ENTRY_POINT_GROUP", "BackendInfo", "list_backends", "load_backend"]

ENTRY_POINT_GROUP = "sandbox_runtime.backends"

#: Backends this project ships, with the extra that installs what each one imports.
_EXTRAS = {
    "local": None,
    "docker": "docker",
    "ags": "ags",
    "kubernetes": "kubernetes",
    "repoenv": None,  # plus its engine's extra (docker by default)
}

_cache: dict[str, type[Backend]] = {}
_cache_lock = threading.Lock()


@dataclass(frozen=True, slots=True)
class BackendInfo:
    """An installed backend: its name, where it lives, and which distribution provides it."""

    name: str
    target: str
    distribution: str | None


def _entry_points() -> dict[str, metadata.EntryPoint]:
    found: dict[str, metadata.EntryPoint] = {}
    for entry_point in metadata.entry_points(group=ENTRY_POINT_GROUP):
        found.setdefault(entry_point.name, entry_point)
    return found


def list_backends() -> list[BackendInfo]:
    """The installed backends, sorted by name, without importing any of them."""
    infos = []
    for name, entry_point in sorted(_entry_points().items()):
        dist = entry_point.dist.name if entry_point.dist is not None else None
        infos.append(BackendInfo(name=name, target=entry_point.value, distribution=dist))
    return infos


def _install_hint(name: str) -> str:
    extra = _EXTRAS.get(name)
    return f"pip install 'sandbox-runtime[{extra}]'" if extra else "pip install sandbox-runtime"


def load_backend(name: str) -> type[Backend]:
    """Return the backend class registered as ``name`` (or at ``module:Class``).

    Raises :class:`BackendNotFoundError` listing what is installed, or
    :class:`BackendUnavailableError` naming the extra when the backend's dependencies are
    missing.
    """
    with _cache_lock:
        cached = _cache.get(name)
    if cached is not None:
        return cached
    if ":" in name:
        backend_cls = _load_dotted(name)
    else:
        entry_point = _entry_points().get(name)
        if entry_point is None:
            installed = ", ".join(sorted(_entry_points())) or "none"
            hint = ""
            if name in _EXTRAS:
                hint = f"; the {name!r} backend is provided by: {_install_hint(name)}"
            raise BackendNotFoundError(
                f"no sandbox backend named {name!r} (installed: {installed}){hint}"
            )
        try:
            loaded = entry_point.load()
        except ImportError as exc:
            hint = _install_hint(name)
            # Our backends' import errors already name the extra; a third party's may not.
            advice = "" if hint in str(exc) else f"; install its dependencies with: {hint}"
            raise BackendUnavailableError(
                f"the {name!r} backend cannot be imported ({exc}){advice}"
            ) from exc
        backend_cls = _check_backend_class(name, loaded)
    with _cache_lock:
        _cache[name] = backend_cls
    return backend_cls


def _load_dotted(path: str) -> type[Backend]:
    module_name, _, attribute = path.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise BackendNotFoundError(f"cannot import backend module {module_name!r}: {exc}") from exc
    try:
        loaded = getattr(module, attribute)
    except AttributeError as exc:
        raise BackendNotFoundError(f"module {module_name!r} has no {attribute!r}") from exc
    return _check_backend_class(path, loaded)


def _check_backend_class(name: str, loaded: object) -> type[Backend]:
    if not (isinstance(loaded, type) and issubclass(loaded, Backend)):
        raise BackendNotFoundError(
            f"{name!r} does not name a sandbox_runtime.Backend subclass (got {loaded!r})"
        )
    return loaded
