"""Finding backends: a built-in table, the ``sandbox_runtime.backends`` entry points, a dotted path.

Two sources, as fsspec's registry has them (the mechanism is :mod:`sandbox_runtime._core.plugins`,
shared with task formats):

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

from typing import Any

from sandbox_runtime._core.backend import Backend
from sandbox_runtime._core.plugins import PluginInfo, Registry
from sandbox_runtime.errors import BackendNotFoundError

__all__ = ["ENTRY_POINT_GROUP", "BackendInfo", "list_backends", "load_backend"]

ENTRY_POINT_GROUP = "sandbox_runtime.backends"

#: An available backend: its name, where it lives, and which distribution provides it.
BackendInfo = PluginInfo

#: This project's backends, and the extra that installs what each module imports.
#: repoenv needs its engine's extra too (docker by default).
_BUILT_INS = {
    "local": ("sandbox_runtime.backends.local:LocalBackend", None),
    "docker": ("sandbox_runtime.backends.docker:DockerBackend", "docker"),
    "kubernetes": ("sandbox_runtime.backends.kubernetes:KubernetesBackend", "kubernetes"),
    "ags": ("sandbox_runtime.backends.ags:AgsBackend", "ags"),
    "e2b": ("sandbox_runtime.backends.e2b:E2bBackend", "e2b"),
    "repoenv": ("sandbox_runtime.backends.repoenv:RepoEnvBackend", None),
    "spread": ("sandbox_runtime.backends.spread:SpreadBackend", None),
}


def _install_hint(name: str) -> str:
    extra = _BUILT_INS.get(name, ("", None))[1]
    return (
        f"pip install 'sandbox-runtime-swe[{extra}]'"
        if extra
        else "pip install sandbox-runtime-swe"
    )


def _check_backend_class(name: str, loaded: object) -> type[Backend[Any]]:
    if not (isinstance(loaded, type) and issubclass(loaded, Backend)):
        raise BackendNotFoundError(
            f"{name!r} does not name a sandbox_runtime.Backend subclass (got {loaded!r})"
        )
    return loaded


BACKENDS: Registry[type[Backend[Any]]] = Registry(
    group=ENTRY_POINT_GROUP,
    kind="sandbox backend",
    built_ins={name: target for name, (target, _extra) in _BUILT_INS.items()},
    check=_check_backend_class,
    not_found=BackendNotFoundError,
    install_hint=_install_hint,
)


def list_backends() -> list[BackendInfo]:
    """The available backends, sorted by name, without importing any of them."""
    return BACKENDS.infos()


def load_backend(name: str) -> type[Backend[Any]]:
    """Return the backend class registered as ``name`` (or at ``module:Class``).

    Raises :class:`BackendNotFoundError` listing what exists, or
    :class:`~sandbox_runtime.errors.BackendUnavailableError` naming the extra when the
    backend's dependencies are missing.
    """
    return BACKENDS.load(name)
