"""Configuration models.

``SandboxConfig`` holds what every backend understands; what only one backend understands
goes in ``options`` and is validated by that backend's own :class:`BackendOptions` model when
the sandbox is opened, so a typo in a backend option fails as loudly as one in a common field.
"""

from __future__ import annotations

import posixpath
import re
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    field_serializer,
    field_validator,
)

__all__ = ["BackendOptions", "Resources", "SandboxConfig", "parse_duration", "parse_memory"]

_DURATION_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_DURATION_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$")
_MEMORY_UNITS = {
    "": 1,
    "b": 1,
    "k": 1000,
    "kb": 1000,
    "ki": 1024,
    "kib": 1024,
    "m": 1000**2,
    "mb": 1000**2,
    "mi": 1024**2,
    "mib": 1024**2,
    "g": 1000**3,
    "gb": 1000**3,
    "gi": 1024**3,
    "gib": 1024**3,
}
_MEMORY_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$")


def parse_duration(value: Any) -> Any:
    """Turn ``"90s"``, ``"30m"``, ``"2h"`` or a number into seconds; leave other input to pydantic.

    Docker-style lower-case ``m`` means minutes here, as in every duration flag users know.
    """
    if isinstance(value, str):
        match = _DURATION_RE.match(value)
        if not match:
            raise ValueError(f"invalid duration {value!r}: use seconds or a number with ms/s/m/h/d")
        number, unit = match.groups()
        return float(number) * _DURATION_UNITS[unit or "s"]
    return value


def parse_memory(value: Any) -> Any:
    """Turn ``"512m"``, ``"2g"``, ``"1Gi"`` or a byte count into bytes.

    Docker reads ``m``/``g`` as binary units (``512m`` is 512 MiB) and Kubernetes reads
    ``M``/``G`` as decimal and ``Mi``/``Gi`` as binary; we follow Docker for the single
    letters, since that is what users of ``docker run -m`` type.
    """
    if isinstance(value, str):
        match = _MEMORY_RE.match(value)
        if not match:
            raise ValueError(f"invalid memory size {value!r}: use bytes or e.g. 512m, 2g, 1Gi")
        number, unit = match.groups()
        unit = unit.lower()
        if unit in ("k", "m", "g"):
            unit += "i"
        if unit not in _MEMORY_UNITS:
            raise ValueError(f"unknown memory unit {match.group(2)!r} in {value!r}")
        return int(float(number) * _MEMORY_UNITS[unit])
    return value


Seconds = Annotated[float, BeforeValidator(parse_duration), Field(gt=0)]
Bytes = Annotated[int, BeforeValidator(parse_memory), Field(gt=0)]


#: The process limit a sandbox gets unless its config says otherwise (``Resources.pids``).
DEFAULT_PIDS = 4096


class Resources(BaseModel):
    """Resource limits; a backend applies those it can and documents the rest."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    cpus: float | None = Field(default=None, gt=0)
    """CPU cores the sandbox may use (fractions allowed)."""
    memory: Bytes | None = None
    """Memory limit in bytes; strings such as ``"512m"`` or ``"2Gi"`` are accepted."""
    pids: int | None = Field(default=DEFAULT_PIDS, gt=0)
    """Maximum number of processes, a guard against fork bombs; ``None`` for no limit.

    On by default: a fork bomb in a sandbox without one is the host's problem (docker:
    the engine's ``PidsLimit``; backends that cannot set it say so in docs/backends.md).
    4096 is far above what test suites spawn (hundreds) and far below what hurts a host."""


class BackendOptions(BaseModel):
    """Base class of the per-backend option models.

    Subclasses list their fields with docstrings; unknown fields are refused so that a
    misspelled option is an error rather than a silent default.
    """

    model_config = ConfigDict(extra="forbid")


#: Option names whose values are credentials, wherever they appear (``token``,
#: ``secret_key``, ``api_key``, ``session_token``, ``password``, ...).
_SECRET_NAME = re.compile(r"token|secret|password|passwd|api_?key|credential|private", re.I)
MASK = "**********"


def mask_secrets(value: Any) -> Any:
    """``value`` with every credential-named entry of its (nested) dicts masked.

    Backend option models hold credentials as ``SecretStr``; this covers options still in
    their raw form, such as a plain string in ``SandboxConfig(options={"token": "..."})``.
    """
    if isinstance(value, dict):
        return {
            key: MASK
            if isinstance(key, str) and _SECRET_NAME.search(key) and item is not None
            else mask_secrets(item)
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [mask_secrets(item) for item in value]
    return value


def _is_absolute_posix(path: str) -> str:
    if not path.startswith("/"):
        raise ValueError(f"must be an absolute POSIX path, got {path!r}")
    return posixpath.normpath(path)


class SandboxConfig(BaseModel):
    """Everything needed to open one sandbox, whatever backend runs it."""

    model_config = ConfigDict(extra="forbid")

    backend: str = "local"
    """Backend name from the ``sandbox_runtime.backends`` entry points, or ``module:Class``."""
    image: str | None = None
    """Container image (docker, kubernetes, ags); for ``local``, an optional template directory."""
    workdir: str = "/workspace"
    """Working directory of commands and base of relative paths; created at start."""
    env: dict[str, str] = Field(default_factory=dict, repr=False)
    """Environment of every command; per-call ``env`` is merged on top.

    Left out of ``repr`` because API keys and tokens travel here.
    """
    resources: Resources = Field(default_factory=Resources)
    start_timeout: Seconds = 120.0
    """Seconds to wait for the sandbox to become ready."""
    exec_timeout: Seconds | None = 600.0
    """Default per-command timeout in seconds; ``None`` means no limit."""
    lifetime: Seconds = 3600.0
    """Seconds after which the sandbox ends itself even if this client dies (its TTL).

    ``extend()``, ``set_lifetime()`` and a ``keep_alive()`` lease move the end while the
    sandbox runs (``docs/leases.md``)."""
    max_lifetime: Seconds | None = None
    """The hard cap: seconds after start past which no extension or lease keeps the sandbox
    (``LifetimeCapError``); ``None``: only the service's own cap (AGS: 24 h)."""
    labels: dict[str, str] = Field(default_factory=dict)
    """Extra labels or tags on the sandbox, for your own bookkeeping."""
    mounts: dict[str, str] = Field(default_factory=dict)
    """Host paths bound into the sandbox, ``{host_path: sandbox_path}``; only backends with
    the ``host_mounts`` capability accept them (others refuse the config)."""
    max_output_bytes: int = Field(default=8 * 1024 * 1024, gt=0)
    """Per-stream output cap; beyond it the head and tail are kept around a marker."""
    run_id: str | None = None
    """Groups the sandboxes of one run (a label); defaults to one id per client process."""
    checkpoint_paths: list[str] = Field(default_factory=list)
    """Absolute paths a filesystem checkpoint keeps besides ``workdir``, on backends that
    checkpoint chosen paths (``kubernetes``; ``docs/checkpoints.md``).  Everything outside
    them is the image's: a sandbox started from the checkpoint does not have it."""
    options: dict[str, Any] | BackendOptions = Field(default_factory=dict)
    """Backend-specific options, validated by the backend's own options model.

    Credentials given here as plain strings never appear in this model's ``repr`` or dumps
    (they are masked); the backend still receives them.
    """

    def __repr_args__(self) -> Any:
        for name, value in super().__repr_args__():
            yield name, mask_secrets(value) if name == "options" else value

    @field_serializer("options", mode="wrap")
    def _serialise_options(
        self, value: dict[str, Any] | BackendOptions, handler: Any, info: Any
    ) -> Any:
        dumped = handler(value)
        # JSON leaves the process (logs, reports, files): credentials are masked there.  A
        # Python dump stays inside it and keeps them, so a config can be rebuilt from it.
        return mask_secrets(dumped) if info.mode == "json" else dumped

    @field_validator("max_lifetime")
    @classmethod
    def _check_max_lifetime(cls, value: float | None, info: Any) -> float | None:
        lifetime = info.data.get("lifetime")
        if value is not None and lifetime is not None and value < lifetime:
            raise ValueError(
                f"max_lifetime ({value:g} s) is shorter than lifetime ({lifetime:g} s)"
            )
        return value

    @field_validator("workdir")
    @classmethod
    def _check_workdir(cls, value: str) -> str:
        return _is_absolute_posix(value)

    @field_validator("checkpoint_paths")
    @classmethod
    def _check_checkpoint_paths(cls, value: list[str]) -> list[str]:
        checked = [_is_absolute_posix(path) for path in value]
        if "/" in checked:
            raise ValueError("'/' cannot be a checkpoint path (it cannot be restored in place)")
        return checked

    @field_validator("mounts")
    @classmethod
    def _check_mounts(cls, value: dict[str, str]) -> dict[str, str]:
        return {host: _is_absolute_posix(inside) for host, inside in value.items()}

    @field_validator("env")
    @classmethod
    def _check_env(cls, value: dict[str, str]) -> dict[str, str]:
        for key, text in value.items():
            if not key or "=" in key or "\0" in key:
                raise ValueError(f"invalid environment variable name {key!r}")
            if "\0" in text:
                raise ValueError(f"environment variable {key} contains a NUL byte")
        return value
