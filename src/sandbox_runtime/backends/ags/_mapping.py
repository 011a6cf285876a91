"""The image -> tool mapping file: written once by ``ags sync``, read by every rollout.

Format (the one ``ags_tool``'s ``ags_tool_sync.py`` writes, so existing files keep working)::

    {"<dataset image>": {"tool_name": "...", "tool_id": "sdt-...", "tcr_image": "<its image>"}}

Training starts thousands of sandboxes; asking the control plane which tool serves an image
for each of them (what the R2E-Gym AGS patch did) costs a listing per rollout and runs into
rate limits.  The mapping turns that into a dictionary lookup: :func:`load_mapping` reads a
file once per process (again only if it changes on disk) and shares the result between
threads.  Lookups also try the image's normalised form, so ``python:3.11`` finds an entry
written as ``docker.io/library/python:3.11`` and the other way round.
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from sandbox_runtime.errors import ConfigError

__all__ = ["MappedTool", "ToolMapping", "load_mapping", "normalize_image"]


def normalize_image(ref: str) -> str:
    """``ref`` with Docker Hub's implicit parts spelled out: registry, ``library/``, ``:latest``."""
    name, at, digest = ref.partition("@")
    last = name.rsplit("/", 1)[-1]
    if ":" not in last and not at:
        name += ":latest"
    first, slash, rest = name.partition("/")
    has_registry = bool(slash) and ("." in first or ":" in first or first == "localhost")
    if not has_registry:
        name = f"docker.io/{name}" if slash else f"docker.io/library/{name}"
    elif first in ("index.docker.io", "registry-1.docker.io"):
        name = f"docker.io/{rest}"
    return name + at + digest


class MappedTool(BaseModel):
    """The tool that serves one image."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    tool_name: str = ""
    tool_id: str = ""
    tcr_image: str = ""
    """The image reference the tool runs (after a push, the registry's copy)."""

    @model_validator(mode="after")
    def _needs_a_tool(self) -> MappedTool:
        if not (self.tool_name or self.tool_id):
            raise ValueError("an entry needs tool_name or tool_id")
        return self


class ToolMapping:
    """Image -> :class:`MappedTool`, with lookups that tolerate Docker Hub spellings."""

    def __init__(self, entries: Mapping[str, MappedTool], source: str = "") -> None:
        self.entries = dict(entries)
        self.source = source
        self._normalized = {normalize_image(image): tool for image, tool in self.entries.items()}

    def __len__(self) -> int:
        return len(self.entries)

    def __iter__(self) -> Iterator[str]:
        return iter(self.entries)

    def resolve(self, image: str) -> MappedTool | None:
        """The tool serving ``image``, or None."""
        return self.entries.get(image) or self._normalized.get(normalize_image(image))

    @classmethod
    def read(cls, path: Path) -> ToolMapping:
        """Parse and validate a mapping file; :class:`ConfigError` says what is wrong."""
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
        except OSError as exc:
            raise ConfigError(f"cannot read the tool mapping {path}: {exc}") from exc
        except ValueError as exc:
            raise ConfigError(f"the tool mapping {path} is not JSON: {exc}") from exc
        if not isinstance(raw, dict):
            raise ConfigError(f"the tool mapping {path} must be a JSON object of images")
        entries: dict[str, MappedTool] = {}
        for image, entry in raw.items():
            try:
                entries[image] = MappedTool.model_validate(entry)
            except ValidationError as exc:
                problem = exc.errors()[0]["msg"]
                raise ConfigError(f"tool mapping {path}, image {image!r}: {problem}") from exc
        return cls(entries, str(path))

    def to_json(self) -> str:
        """The file's content: sorted by image, one entry per image."""
        data = {
            image: tool.model_dump(exclude_defaults=False)
            for image, tool in sorted(self.entries.items())
        }
        return json.dumps(data, indent=2, sort_keys=True) + "\n"

    def write(self, path: Path) -> None:
        """Write atomically: readers see the old file or the new one, never half of one."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", text=True)
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as stream:
                stream.write(self.to_json())
                stream.flush()
                os.fsync(stream.fileno())
            os.replace(temporary, path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise


_cache: dict[str, tuple[tuple[int, int], ToolMapping]] = {}
_cache_lock = threading.Lock()


def load_mapping(path: str | os.PathLike[str]) -> ToolMapping:
    """The mapping at ``path``, parsed once per process and again only when the file changes."""
    resolved = Path(path).expanduser().resolve()
    try:
        stat = resolved.stat()
    except OSError as exc:
        raise ConfigError(f"cannot read the tool mapping {resolved}: {exc}") from exc
    stamp = (stat.st_mtime_ns, stat.st_size)
    key = str(resolved)
    with _cache_lock:
        cached = _cache.get(key)
        if cached is not None and cached[0] == stamp:
            return cached[1]
        mapping = ToolMapping.read(resolved)
        _cache[key] = (stamp, mapping)
        return mapping
