"""Finding backends: a built-in table, the ``sandbox_runtime.backends`` entry points, a dotted path.

Two sources, as fsspec's registry has them:

* the **built-in table** below names this project's backends by lazy ``module:Class`` paths, so a
  source tree on ``PYTHONPATH`` (no installed metadata: a vendored copy, a notebook next to a
  checkout) still finds ``local`` and the others;
* the **entry-point group** ``sandbox_runtime.backends`` is how third parties add backends (and
  how this project's own are also declared, so tools that read entry points see them).  An entry
  point of the same name as a built-in replaces it.

Backend modules are imported only when a sandbox of that backend is opened: listing imports
nothing.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from typing import Any

from sandbox_runtime.backend import Backend
from sandbox_runtime.errors import BackendNotFoundError, BackendUnavailableError

__all__ = ["ENTRY_POINT_GROUP", "BackendInfo", "list_backends", "load_backend"]

ENTRY_POINT_GROUP = "sandbox_runtime.backends"


@dataclass(frozen=True, slots=True)
class _BuiltIn:
    target: str
    extra: str | None
    """The ``sandbox-runtime[...]`` extra that installs what the module imports."""


#: This project's backends.  repoenv needs its engine's extra too (docker by default).
_BUILT_INS = {
    "local": _BuiltIn("sandbox_runtime.backends.local:LocalBackend", None),
    "docker": _BuiltIn("sandbox_runtime.backends.docker:DockerBackend", "docker"),
    "kubernetes": _BuiltIn("sandbox_runtime.backends.kubernetes:KubernetesBackend", "kubernetes"),
    "ags": _BuiltIn("sandbox_runtime.backends.ags:AgsBackend", "ags"),
    "repoenv": _BuiltIn("sandbox_runtime.integrations.repoenv:RepoEnvBackend", None),
}

_cache: dict[str, type[Backend[Any]]] = {}
_cache_lock = threading.Lock()


@dataclass(frozen=True, slots=True)
class BackendInfo:
    """An available backend: its name, where it lives, and which distribution provides it.

    ``distribution`` is ``None`` for a built-in found without installed metadata.
    """

    name: str
    target: str
    distribution: str | None


@dataclass(frozen=True, slots=True)
class _Source:
    info: BackendInfo
    load: Callable[[], object]


def _entry_points() -> dict[str, metadata.EntryPoint]:
    found: dict[str, metadata.EntryPoint] = {}
    for entry_point in metadata.entry_points(group=ENTRY_POINT_GROUP):
        found.setdefault(entry_point.name, entry_point)
    return found


def _sources() -> dict[str, _Source]:
    sources = {
        name: _Source(BackendInfo(name, built_in.target, None), _importer(built_in.target))
        for name, built_in in _BUILT_INS.items()
    }
    for name, entry_point in _entry_points().items():
        dist = entry_point.dist.name if entry_point.dist is not None else None
        sources[name] = _Source(BackendInfo(name, entry_point.value, dist), entry_point.load)
    return sources


def _importer(target: str) -> Callable[[], object]:
    def load() -> object:
        module_name, _, attribute = target.partition(":")
        return getattr(importlib.import_module(module_name), attribute)

    return load


def list_backends() -> list[BackendInfo]:
    """The available backends, sorted by name, without importing any of them."""
    return [source.info for _, source in sorted(_sources().items())]


def _install_hint(name: str) -> str:
    built_in = _BUILT_INS.get(name)
    extra = built_in.extra if built_in is not None else None
    return f"pip install 'sandbox-runtime[{extra}]'" if extra else "pip install sandbox-runtime"


def load_backend(name: str) -> type[Backend[Any]]:
    """Return the backend class registered as ``name`` (or at ``module:Class``).

    Raises :class:`BackendNotFoundError` listing what exists, or
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
        sources = _sources()
        source = sources.get(name)
        if source is None:
            known = ", ".join(sorted(sources)) or "none"
            raise BackendNotFoundError(f"no sandbox backend named {name!r} (known: {known})")
        try:
            loaded = source.load()
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


def _load_dotted(path: str) -> type[Backend[Any]]:
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


def _check_backend_class(name: str, loaded: object) -> type[Backend[Any]]:
    if not (isinstance(loaded, type) and issubclass(loaded, Backend)):
        raise BackendNotFoundError(
            f"{name!r} does not name a sandbox_runtime.Backend subclass (got {loaded!r})"
        )
    return loaded
