"""The sandbox keys every harness adapter shares (``integrations/_sandbox_config.py``).

Needs no harness installed, so this file is collected in every venv.
"""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from sandbox_runtime.integrations._harness_tasks import HARNESS_LABEL, RUN_LABEL
from sandbox_runtime.integrations._sandbox_config import (
    HarnessSandboxFields,
    HarnessSandboxFieldsWithEnv,
)


def test_a_config_cannot_take_over_the_run_labels_that_cleanup_finds() -> None:
    fields = HarnessSandboxFields(labels={"team": "a", HARNESS_LABEL: "x", RUN_LABEL: "y"})
    labels = fields.run_labels("inspect", "run1", extra="e")
    assert labels == {"team": "a", HARNESS_LABEL: "inspect", RUN_LABEL: "run1", "extra": "e"}


def test_the_sandbox_config_carries_the_keys_and_the_overrides() -> None:
    fields = HarnessSandboxFieldsWithEnv(
        backend="local",
        backend_options={"base_dir": "/tmp/x"},
        workdir="/w",
        lifetime="30m",
        resources={"cpus": 1},
        env={"A": "1"},
    )
    config = fields.sandbox_config({"k": "v"}, env=fields.env, image="img")
    assert (config.backend, config.workdir, config.image) == ("local", "/w", "img")
    assert (config.lifetime, config.labels, config.env) == (1800, {"k": "v"}, {"A": "1"})
    assert config.options == {"base_dir": "/tmp/x"}
    assert config.resources.cpus == 1


def test_a_bad_key_is_named() -> None:
    with pytest.raises(ValidationError, match="bakend"):
        HarnessSandboxFields(bakend="local")  # type: ignore[call-arg]
    # env only where the harness's config sets the commands' variables (not Harbor's)
    with pytest.raises(ValidationError, match="env"):
        HarnessSandboxFields(env={"A": "1"})  # type: ignore[call-arg]
