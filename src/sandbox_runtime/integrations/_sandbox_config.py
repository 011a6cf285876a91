"""The sandbox keys every harness adapter's config shares, and the sandbox config they make.

Each harness configures its provider in its own file format (mini-swe-agent's
``environment:``, Inspect's sandbox spec, SWE-ReX's deployment keyword arguments, Harbor's
``environment.kwargs``), but the sandbox part is the same in all of them: which backend, its
options, the image, the working directory, how long the sandbox may live, its resources and
labels.  One model holds those keys, so their names, defaults and validation (and so the
one-line errors naming a bad key) are the same under every harness; each adapter subclasses it
with its own keys and says in its class docstring what ``image`` and ``workdir`` mean there.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from sandbox_runtime._core.config import SandboxConfig
from sandbox_runtime.integrations._harness_tasks import HARNESS_LABEL, RUN_LABEL

__all__ = ["HarnessSandboxFields", "HarnessSandboxFieldsWithEnv"]


class HarnessSandboxFields(BaseModel):
    """Where and how a harness's sandbox runs (keys a harness does not know are refused)."""

    model_config = ConfigDict(extra="forbid")

    backend: str = "docker"
    """This library's backend (``local``, ``docker``, ``kubernetes``, ``ags``, ``e2b``, ...)."""
    backend_options: dict[str, Any] = Field(default_factory=dict)
    """The backend's options, as ``sandbox-runtime --backend-option`` takes them."""
    image: str | None = None
    """The sandbox's image (the backend's default when unset)."""
    workdir: str = "/workspace"
    """The sandbox's working directory, created at start."""
    lifetime: float | str = "2h"
    """How long the sandbox may live at most (``30m``, ``2h``, seconds)."""
    resources: dict[str, Any] = Field(default_factory=dict)
    """``cpus``, ``memory``, ``pids`` as :class:`~sandbox_runtime.SandboxConfig` takes them."""
    labels: dict[str, str] = Field(default_factory=dict)
    """Labels of the sandbox, e.g. to find a run's sandboxes with ``list_sandboxes``."""

    def run_labels(self, harness: str, run_id: str, **extra: str) -> dict[str, str]:
        """The sandbox's labels: the config's, then the harness's name and the run's id.

        The harness and run labels come last so that a config cannot hide a sandbox from its
        run's cleanup (which finds the run's sandboxes by them).
        """
        return {**self.labels, HARNESS_LABEL: harness, RUN_LABEL: run_id, **extra}

    def sandbox_config(self, labels: Mapping[str, str], **fields: Any) -> SandboxConfig:
        """The :class:`SandboxConfig` of these keys with ``labels``; ``fields`` override."""
        values: dict[str, Any] = {
            "backend": self.backend,
            "image": self.image,
            "workdir": self.workdir,
            "lifetime": self.lifetime,
            "resources": self.resources,
            "labels": dict(labels),
            "options": self.backend_options,
        }
        values.update(fields)
        return SandboxConfig(**values)


class HarnessSandboxFieldsWithEnv(HarnessSandboxFields):
    """The shared keys and ``env``, for harnesses whose config sets the commands' variables."""

    env: dict[str, str] = Field(default_factory=dict)
    """Variables every command sees."""
