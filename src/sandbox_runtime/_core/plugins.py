"""One way to find plug-ins: a built-in table, an entry-point group, or a ``module:attr`` path.

Backends (:mod:`sandbox_runtime._core.registry`) and task formats
(:mod:`sandbox_runtime.swe.formats`) are found the same way, the way fsspec finds its
filesystems: this project's own are named in a built-in table of lazy dotted paths, so a
source tree without installed metadata still finds them; third parties declare an entry
point in their distribution, which also replaces a built-in of the same name.  Nothing is
imported until a plug-in is loaded, so listing stays cheap.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib import metadata
from typing import Generic, TypeVar

from sandbox_runtime.errors import BackendUnavailableError, SandboxError

__all__ = ["PluginInfo", "Registry"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class PluginInfo:
    """A plug-in that can be loaded: its name, where it lives, and who provides it.

    ``distribution`` is ``None`` for a built-in found without installed metadata.
    """

    name: str
    target: str
    distribution: str | None


@dataclass(frozen=True, slots=True)
class _Source:
    info: PluginInfo
    load: Callable[[], object]


def _import_target(target: str) -> object:
    module_name, _, attribute = target.partition(":")
    return getattr(importlib.import_module(module_name), attribute)


class Registry(Generic[T]):
    """Plug-ins of one kind: ``check`` turns a loaded object into a ``T`` or raises."""

    def __init__(
        self,
        *,
        group: str,
        kind: str,
        built_ins: Mapping[str, str],
        check: Callable[[str, object], T],
        not_found: Callable[[str], SandboxError],
        install_hint: Callable[[str], str] = lambda name: "pip install sandbox-runtime-swe",
    ) -> None:
        self.group = group
        self.kind = kind
        self.built_ins = dict(built_ins)
        self._check = check
        self._not_found = not_found
        self._install_hint = install_hint
        self._cache: dict[str, T] = {}
        self._lock = threading.Lock()
        # One first load at a time: 32 sandboxes starting at once in a fresh process would
        # otherwise each scan every installed distribution's entry points (4 ms of CPU for
        # 135 distributions here, more in a training venv) before one of them fills the
        # cache.  Reentrant, so a plug-in whose import loads another does not wait for itself.
        self._loading = threading.RLock()

    def entry_points(self) -> dict[str, metadata.EntryPoint]:
        """The group's entry points by name (the first of a name wins)."""
        found: dict[str, metadata.EntryPoint] = {}
        for entry_point in metadata.entry_points(group=self.group):
            found.setdefault(entry_point.name, entry_point)
        return found

    def _sources(self) -> dict[str, _Source]:
        sources = {
            name: _Source(PluginInfo(name, target, None), _loader(target))
            for name, target in self.built_ins.items()
        }
        for name, entry_point in self.entry_points().items():
            dist = entry_point.dist.name if entry_point.dist is not None else None
            sources[name] = _Source(PluginInfo(name, entry_point.value, dist), entry_point.load)
        return sources

    def infos(self) -> list[PluginInfo]:
        """Every known plug-in, sorted by name, none of them imported."""
        return [source.info for _, source in sorted(self._sources().items())]

    def names(self) -> list[str]:
        """The known names, sorted."""
        return sorted(self._sources())

    def load(self, name: str) -> T:
        """The plug-in called ``name`` (or at ``module:attr``), imported once and cached."""
        with self._lock:
            cached = self._cache.get(name)
        if cached is not None:
            return cached
        with self._loading:
            with self._lock:
                cached = self._cache.get(name)
            if cached is not None:  # another thread loaded it while this one waited
                return cached
            return self._load_uncached(name)

    def _load_uncached(self, name: str) -> T:
        if ":" in name:
            loaded = self._load_dotted(name)
        else:
            source = self._sources().get(name)
            if source is None:
                known = ", ".join(self.names()) or "none"
                raise self._not_found(f"no {self.kind} named {name!r} (known: {known})")
            try:
                loaded = source.load()
            except ImportError as exc:
                hint = self._install_hint(name)
                # Our modules' import errors already name the extra; a third party's may not.
                advice = "" if hint in str(exc) else f"; install its dependencies with: {hint}"
                raise BackendUnavailableError(
                    f"the {name!r} {self.kind} cannot be imported ({exc}){advice}"
                ) from exc
        checked = self._check(name, loaded)
        with self._lock:
            self._cache[name] = checked
        return checked

    def _load_dotted(self, path: str) -> object:
        module_name, _, attribute = path.partition(":")
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            raise self._not_found(
                f"cannot import {self.kind} module {module_name!r}: {exc}"
            ) from exc
        try:
            return getattr(module, attribute)
        except AttributeError as exc:
            raise self._not_found(f"module {module_name!r} has no {attribute!r}") from exc

    def clear_cache(self) -> None:
        """Forget loaded plug-ins (for tests that install or remove distributions)."""
        with self._lock:
            self._cache.clear()


def _loader(target: str) -> Callable[[], object]:
    return lambda: _import_target(target)
