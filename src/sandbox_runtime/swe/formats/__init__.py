"""Task formats as plug-ins: the built-ins, and any a distribution adds by entry point.

Built-in formats (one module each):

============  ================================================================
``r2e``       R2E-Gym rows (``R2E-Gym/R2E-Gym-Lite``, ``-Subset``, ``-V1``)
``swebench``  SWE-bench, -Lite, -Verified (and R2E-Gym's copies of them)
``swesmith``  SWE-smith task instances
``jsonl``     Graph Planner-style JSONL tasks (``{task_id, issue, sandbox: {...}}``)
============  ================================================================

A third party adds one with a :class:`~sandbox_runtime.swe.formats.base.RowFormat` subclass
and an entry point in the ``sandbox_runtime.task_formats`` group; it is then detected in
task files, accepted by ``--format``, prepared and graded like the built-ins.  Formats are
imported only when used.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from sandbox_runtime._core.plugins import PluginInfo, Registry
from sandbox_runtime.errors import ConfigError, SandboxError
from sandbox_runtime.swe.formats.base import ParseContext, RowFormat

__all__ = [
    "ENTRY_POINT_GROUP",
    "FORMATS",
    "ParseContext",
    "RowFormat",
    "detect",
    "list_formats",
    "load_format",
]

ENTRY_POINT_GROUP = "sandbox_runtime.task_formats"

logger = logging.getLogger("sandbox_runtime.swe")

_BUILT_INS = {
    "r2e": "sandbox_runtime.swe.formats.r2e:R2EGymFormat",
    "swebench": "sandbox_runtime.swe.formats.swebench:SWEBenchFormat",
    "swesmith": "sandbox_runtime.swe.formats.swesmith:SWESmithFormat",
    "jsonl": "sandbox_runtime.swe.formats.jsonl:JsonlTaskFormat",
}


def _check_format_class(name: str, loaded: object) -> type[RowFormat]:
    if not (isinstance(loaded, type) and issubclass(loaded, RowFormat)):
        raise ConfigError(f"{name!r} does not name a RowFormat subclass (got {loaded!r})")
    if not loaded.name:
        raise ConfigError(f"task format {name!r} has no name")
    return loaded


FORMATS: Registry[type[RowFormat]] = Registry(
    group=ENTRY_POINT_GROUP,
    kind="task format",
    built_ins=_BUILT_INS,
    check=_check_format_class,
    not_found=ConfigError,
)


def list_formats() -> list[PluginInfo]:
    """Every known task format, sorted by name, none imported."""
    return FORMATS.infos()


def load_format(name: str) -> type[RowFormat]:
    """The format called ``name`` (or at ``module:Class``); unknown names list the known."""
    return FORMATS.load(name)


def detect(row: Mapping[str, Any]) -> type[RowFormat]:
    """The format of ``row``: the first, by priority, whose ``detect`` says yes."""
    loaded = []
    for name in FORMATS.names():
        try:
            loaded.append(load_format(name))
        except SandboxError as exc:  # a third party's broken format must not stop the others
            logger.warning("task format %s is skipped: %s", name, exc)
    formats = sorted(loaded, key=lambda fmt: (-fmt.priority, fmt.name))
    for fmt in formats:
        if fmt.detect(row):
            return fmt
    names = ", ".join(fmt.name for fmt in formats)
    raise ValueError(f"unknown row format (known: {names}); got keys {sorted(row)[:12]}")
