"""The config of Inspect's ``sandbox-runtime`` sandbox environment (a sample's sandbox spec).

Inspect passes a sandbox environment its config as a model (``("sandbox-runtime",
SandboxRuntimeConfig(backend="local"))`` in Python, deserialized from a log by
``config_deserialize``) or as a string (a file name: here, a YAML or JSON file with the same
fields).  Inspect hashes sandbox specs, so the model is frozen and hashes its JSON.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import ConfigDict, ValidationError, field_serializer

from sandbox_runtime._core.config import mask_secrets
from sandbox_runtime.errors import ConfigError
from sandbox_runtime.integrations._sandbox_config import HarnessSandboxFieldsWithEnv

__all__ = ["SandboxRuntimeConfig", "resolve_config"]


class SandboxRuntimeConfig(HarnessSandboxFieldsWithEnv):
    """Which backend runs a sample's sandbox, and how (``extra`` keys are refused).

    The sandbox keys are every harness adapter's (:mod:`.._sandbox_config`): ``image`` is
    unused for a task sample (the task names its own), ``workdir`` is the per-sample directory
    relative paths resolve to (a task's: its own).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    tasks: str | None = None
    """A task source of this library (``bundled``, ``bundled:r2e``, a JSONL file): each
    sample whose metadata names a ``task_id`` of it gets that task's prepared sandbox."""
    base_image: str | None = None
    """Base image of the bundled samples' Docker images (``sandbox-runtime run --base-image``)."""

    @field_serializer("backend_options", "env", mode="wrap")
    def _mask(self, value: Any, handler: Any, info: Any) -> Any:
        """Inspect writes sample sandbox specs into its logs: no credentials there."""
        dumped = handler(value)
        return mask_secrets(dumped) if info.mode == "json" else dumped

    def __hash__(self) -> int:
        return hash(self.model_dump_json())


def resolve_config(config: object) -> SandboxRuntimeConfig:
    """The config Inspect passed: none (defaults), the model, a dict, or a file name."""
    if config is None:
        return SandboxRuntimeConfig()
    if isinstance(config, SandboxRuntimeConfig):
        return config
    try:
        if isinstance(config, dict):
            return SandboxRuntimeConfig.model_validate(config)
        if isinstance(config, str):
            return _from_file(Path(config))
    except ValidationError as exc:
        raise ConfigError(f"sandbox-runtime sandbox config: {_first_error(exc)}") from exc
    raise ConfigError(
        f"sandbox-runtime sandbox config: expected SandboxRuntimeConfig or a file name, "
        f"got {type(config).__name__}"
    )


def _from_file(path: Path) -> SandboxRuntimeConfig:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"sandbox-runtime sandbox config {path}: {exc}") from exc
    if path.suffix == ".json":
        data = json.loads(text)
    else:
        import yaml  # type: ignore[import-untyped,unused-ignore]

        data = yaml.safe_load(text)
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a sandbox-runtime sandbox config is a mapping of fields")
    try:
        return SandboxRuntimeConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(f"{path}: {_first_error(exc)}") from exc


def _first_error(exc: ValidationError) -> str:
    error = exc.errors()[0]
    where = ".".join(str(part) for part in error["loc"]) or "config"
    return f"{where}: {error['msg']}"
