"""Where the flow's sandbox runs and how long it may take: the flow's own configuration.

rLLM main's ``--sandbox-backend`` is a closed choice list for rLLM's own sandboxes (and any
choice outside ``docker``/``local``/``apple-container`` starts a cloudflared tunnel), so this
flow never reads it.  Its settings come from three places, each overriding the one before:

1. a TOML or JSON file named by ``SANDBOX_RUNTIME_RLLM_CONFIG`` (top-level keys below);
2. ``SANDBOX_RUNTIME_RLLM_BACKEND`` (a backend name) and ``SANDBOX_RUNTIME_RLLM_BACKEND_OPTIONS``
   (a JSON object of that backend's options);
3. the task's own row: a ``sandbox_runtime`` mapping in the dataset row (rLLM puts the row in
   ``Task.metadata``), as written by :func:`~sandbox_runtime.integrations.rllm_flow.benchmark.
   write_benchmark`.

Environment variables reach Ray workers only where the trainer forwards them; a row's own
settings travel with the data, which is why the row wins.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from sandbox_runtime.errors import ConfigError
from sandbox_runtime.swe.grading import DEFAULT_TEST_TIMEOUT

__all__ = [
    "BACKEND_ENV",
    "BACKEND_OPTIONS_ENV",
    "CONFIG_ENV",
    "ROW_KEY",
    "FlowSettings",
    "resolve_settings",
]

CONFIG_ENV = "SANDBOX_RUNTIME_RLLM_CONFIG"
BACKEND_ENV = "SANDBOX_RUNTIME_RLLM_BACKEND"
BACKEND_OPTIONS_ENV = "SANDBOX_RUNTIME_RLLM_BACKEND_OPTIONS"
#: The key of a dataset row that holds that row's settings.
ROW_KEY = "sandbox_runtime"


class FlowSettings(BaseModel):
    """Everything the flow and the evaluator need beyond the task and the model's URL."""

    model_config = ConfigDict(extra="forbid")

    backend: str = "docker"
    """Any backend of this library (``local``, ``docker``, ``kubernetes``, ``ags``, ...)."""
    backend_options: dict[str, Any] = Field(default_factory=dict)
    """That backend's options (``isolation`` for ``local``, ``namespace`` for kubernetes...)."""
    base_image: str | None = None
    """Base of the bundled samples' images on image backends."""
    step_timeout: float = Field(default=90.0, gt=0)
    """Seconds one tool call may run."""
    reward_timeout: float = Field(default=DEFAULT_TEST_TIMEOUT, gt=0)
    """Seconds the task's tests may run when grading."""
    max_steps: int = Field(default=40, gt=0)
    """Model calls per episode; the task's own ``max_steps`` wins when it names one."""
    max_output_chars: int = Field(default=16000, gt=0)
    tools: Literal["auto", "r2egym", "builtin"] = "auto"
    """R2E-Gym's own tool scripts (``r2egym``), this library's (``builtin``), or ``auto``."""
    temperature: float | None = None
    """Sent with each request when set (rLLM's gateway may enforce its own)."""
    max_tokens: int | None = Field(default=None, gt=0)
    request_timeout: float = Field(default=600.0, gt=0)
    """Seconds one model request may take."""
    share_setup: bool = True
    """Rollouts of one task in this process (rLLM's group: each task ``group_size`` times)
    share one prepared sandbox: it is set up once, checkpointed, and every rollout and fresh
    grading sandbox starts from the checkpoint, where the backend forks (``Capability.FORK``;
    otherwise each sets up its own, as with ``false``).  See :mod:`sandbox_runtime.swe.prepared`."""
    grading: Literal["strict", "benchmark"] = "strict"
    """``strict`` (the default for training): only the diff's changes to non-test source reach
    the tests (:mod:`sandbox_runtime.swe.strict`), so a gamed test never earns a reward;
    ``benchmark``: the whole diff, as the benchmark's own harness applies it."""


def _read_file(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{CONFIG_ENV}={path}: cannot read it: {exc}") from exc
    kind = "JSON" if path.suffix == ".json" else "TOML"
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib  # type: ignore[import-not-found,unused-ignore]
    try:
        data = json.loads(text) if kind == "JSON" else tomllib.loads(text)
    except ValueError as exc:  # TOMLDecodeError is a ValueError
        raise ConfigError(f"{path}: not valid {kind}: {exc}") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the settings must be an object of keys")
    return data


def _from_environment(environ: Mapping[str, str]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    path = environ.get(CONFIG_ENV)
    if path:
        found.update(_read_file(Path(path)))
    backend = environ.get(BACKEND_ENV)
    if backend:
        found["backend"] = backend
    options = environ.get(BACKEND_OPTIONS_ENV)
    if options:
        try:
            parsed = json.loads(options)
        except ValueError as exc:
            raise ConfigError(f"{BACKEND_OPTIONS_ENV}: not JSON: {exc}") from exc
        if not isinstance(parsed, dict):
            raise ConfigError(f"{BACKEND_OPTIONS_ENV}: must be a JSON object")
        found["backend_options"] = parsed
    return found


def _validate(values: dict[str, Any], where: str) -> FlowSettings:
    try:
        return FlowSettings.model_validate(values)
    except ValidationError as exc:
        error = exc.errors()[0]
        field = ".".join(str(part) for part in error["loc"]) or "(settings)"
        raise ConfigError(f"{where}: field {field!r}: {error['msg']}") from exc


def resolve_settings(
    row: Mapping[str, Any] | None = None, environ: Mapping[str, str] | None = None
) -> FlowSettings:
    """The settings for one task: file, then environment, then the row's own, merged."""
    env = os.environ if environ is None else environ
    values = _from_environment(env)
    where = "sandbox-runtime rLLM settings (" + (env.get(CONFIG_ENV) or "environment") + ")"
    own = (row or {}).get(ROW_KEY)
    if own is not None:
        if not isinstance(own, Mapping):
            raise ConfigError(f"task row: field {ROW_KEY!r} must be an object of settings")
        values = {**values, **dict(own)}
        where = f"task row field {ROW_KEY!r} over " + where
    return _validate(values, where)
