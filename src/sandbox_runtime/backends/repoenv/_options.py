"""The ``repoenv`` backend's options: the R2E-Gym dataset entry, and the engine that runs it."""

from __future__ import annotations

import json
from functools import cached_property
from pathlib import Path
from typing import Any

from pydantic import Field, model_validator

from sandbox_runtime.backend_kit import BackendOptions

__all__ = ["RepoEnvOptions"]


class RepoEnvOptions(BackendOptions):
    """Which dataset entry to open, and on which engine."""

    ds: dict[str, Any] | None = Field(default=None, repr=False)
    """The R2E-Gym dataset entry itself (a row of e.g. ``R2E-Gym/R2E-Gym-Lite``)."""
    ds_json: Path | None = None
    """A JSON file holding one entry (Graph Planner's ``sandbox.r2e_ds_json``)."""
    engine: str = "docker"
    """The backend that runs the sandbox."""
    engine_options: dict[str, Any] = Field(default_factory=dict)
    """That backend's own options."""
    base_image: str | None = None
    """Base image when one of the bundled sample entries is built for a container engine."""

    @model_validator(mode="after")
    def _one_entry(self) -> RepoEnvOptions:
        if self.engine == "repoenv":
            raise ValueError("engine: repoenv cannot run on itself; name docker, local, ...")
        if self.ds is not None and self.ds_json is not None:
            raise ValueError("give the entry as ds or as ds_json, not both")
        if self.ds_json is not None:
            try:
                loaded = json.loads(self.ds_json.expanduser().read_text(encoding="utf-8"))
            except OSError as exc:
                raise ValueError(f"ds_json: cannot read {self.ds_json}: {exc.strerror}") from None
            except json.JSONDecodeError as exc:
                raise ValueError(f"ds_json: {self.ds_json} is not JSON: {exc.msg}") from None
            if not isinstance(loaded, dict):
                raise ValueError(f"ds_json: {self.ds_json} must hold one JSON object")
            self.ds = loaded
        if self.ds is not None:
            self.task  # noqa: B018  (a bad entry is an error now, naming its field)
        return self

    @cached_property
    def task(self) -> Any:
        """The entry read as a task (``None`` without one): its image, workdir and repo."""
        if self.ds is None:
            return None
        from sandbox_runtime.swe.rows import parse_row
        from sandbox_runtime.swe.task import TaskError

        try:
            return parse_row(self.ds, index="ds", format="r2e")
        except TaskError as exc:
            raise ValueError(f"ds: not an R2E-Gym entry: {exc}") from None
