"""The ``ags`` backend's checkpoints, forks and pause against the emulator's Cloud API.

The conformance suite (``tests/conformance/test_ags.py``) checks the contents; these check
what is particular to AGS: the actions and states on the wire, snapshot tags as the record of
ownership, the service's errors as the library's, the e2b plane declaring what the service's
e2b routes serve (the ``e2b`` backend's shared code), and the ``memory_snapshots`` option.
The emulator keeps files only, so a pause here keeps the files and the instance id, not the
processes (the real service keeps them with ``Memory`` true).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from sandbox_runtime import (
    BackendError,
    Capability,
    CapabilityUnsupportedError,
    CheckpointNotFoundError,
    SandboxConfig,
    SandboxRuntime,
    delete_checkpoint,
    list_checkpoints,
    load_backend,
)
from sandbox_runtime_emulators.ags.server import AgsEmulator
from tests.ags.conftest import isolation

pytestmark = pytest.mark.e2b_sdk


def _config(emulator: AgsEmulator, **options: Any) -> SandboxConfig:
    return SandboxConfig(
        backend="ags",
        workdir="/testbed",
        lifetime=600,
        options=emulator.backend_options(**options),
    )


def _status(emulator: AgsEmulator, instance_id: str) -> str:
    return emulator.service.store.instance(instance_id).status


def test_pause_and_resume_wait_for_the_states(emulator: AgsEmulator) -> None:
    with SandboxRuntime(_config(emulator, memory_snapshots=True)) as sandbox:
        backend = sandbox.backend
        declared = backend.capabilities_for(backend.options)
        assert {Capability.PAUSE, Capability.CHECKPOINT_MEMORY} <= declared
        sandbox.write_text("kept.txt", "before pause")
        instance_id = sandbox.id
        sandbox.pause()
        assert sandbox.paused
        assert _status(emulator, instance_id) == "PAUSED"
        sandbox.resume()
        assert _status(emulator, instance_id) == "RUNNING"
        assert sandbox.id == instance_id
        assert sandbox.read_text("kept.txt") == "before pause"  # a new data-plane token works
        assert sandbox.exec("echo ran").stdout == "ran\n"
        # Memory was asked for; the emulator answers MemoryIncluded false, which wins.
        checkpoint = sandbox.checkpoint()
        assert checkpoint.kind == "filesystem"
    delete_checkpoint(checkpoint, options=_config(emulator).options)


def test_without_memory_snapshots_pause_is_refused_by_name(emulator: AgsEmulator) -> None:
    with SandboxRuntime(_config(emulator)) as sandbox:
        with pytest.raises(CapabilityUnsupportedError) as refused:
            sandbox.pause()
        assert refused.value.capability == "pause"
        with pytest.raises(CapabilityUnsupportedError, match="memory_snapshots"):
            sandbox.backend.pause()  # the hook itself refuses too
        assert emulator.faults.requests("cloud", "PauseSandboxInstance") == []


def test_the_e2b_plane_declares_what_the_service_serves(
    emulator: AgsEmulator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SANDBOX_RUNTIME_CHECKPOINT_DIR", str(tmp_path))
    options = emulator.backend_options(control_plane="e2b", api_key=emulator.api_key)
    config = SandboxConfig(backend="ags", workdir="/testbed", lifetime=600, options=options)
    with SandboxRuntime(config) as sandbox:  # the emulator serves e2b's snapshot routes
        backend = sandbox.backend
        assert Capability.FORK in backend.capabilities_for(backend.options)
        checkpoint = sandbox.checkpoint(labels={"plane": "e2b"})
        assert emulator.service.store.snapshot(checkpoint.id) is not None
    assert [c.id for c in list_checkpoints("ags", options=options)] == [checkpoint.id]
    delete_checkpoint(checkpoint, options=options)
    with AgsEmulator(
        backend="local", local_isolation=isolation(), e2b_checkpoint_routes=False
    ) as older:  # an E2B door without the routes: nothing declared, calls refused
        options = older.backend_options(control_plane="e2b", api_key=older.api_key)
        config = SandboxConfig(backend="ags", workdir="/testbed", lifetime=600, options=options)
        with SandboxRuntime(config) as sandbox:
            backend = sandbox.backend
            assert Capability.FORK not in backend.capabilities_for(backend.options)
            with pytest.raises(CapabilityUnsupportedError):
                sandbox.checkpoint()
            with pytest.raises(CapabilityUnsupportedError):
                sandbox.fork(1)
        with pytest.raises(CapabilityUnsupportedError):
            list_checkpoints("ags", options=options)


def test_snapshot_tags_carry_labels_and_ownership(emulator: AgsEmulator) -> None:
    options = _config(emulator).options
    with SandboxRuntime(_config(emulator)) as sandbox:
        checkpoint = sandbox.checkpoint(labels={"task": "t-1", "odd": "a b/c=d"})
        stored = emulator.service.store.snapshot(checkpoint.id)
        tags = {tag["Key"]: tag["Value"] for tag in stored.tags}
        assert tags["sandbox-runtime.managed"] == "true"
        assert tags["sandbox-runtime.checkpoint"] == "true"
        assert tags["sandbox-runtime.source"] == sandbox.id
        # Someone else's snapshot of the same instance: never listed, deleted or reaped.
        foreign = emulator.service.store.snapshots
        client = sandbox.backend._cloud_client()  # type: ignore[attr-defined]
        other = client.create_snapshot(
            sandbox.id, name="console", memory=False, tags={}, client_token="foreign-1"
        )
        assert other.snapshot_id in foreign
    found = list_checkpoints("ags", labels={"task": "t-1"}, options=options)
    assert [item.id for item in found] == [checkpoint.id]
    assert found[0].labels == {"task": "t-1", "odd": "a b/c=d"}
    assert found[0].owner is not None
    assert found[0].expires_at is not None
    assert other.snapshot_id not in [item.id for item in list_checkpoints("ags", options=options)]
    with pytest.raises(CheckpointNotFoundError, match="not a checkpoint of this library"):
        delete_checkpoint(other.snapshot_id, backend="ags", options=options)
    delete_checkpoint(checkpoint, options=options)
    with pytest.raises(CheckpointNotFoundError):
        delete_checkpoint(checkpoint, options=options)
    client.delete_snapshot(other.snapshot_id)


def test_a_deleted_checkpoint_is_not_found_and_rollback_keeps_the_sandbox(
    emulator: AgsEmulator,
) -> None:
    options = _config(emulator).options
    with SandboxRuntime(_config(emulator)) as sandbox:
        sandbox.write_text("state.txt", "now")
        checkpoint = sandbox.checkpoint()
        delete_checkpoint(checkpoint, options=options)
        instance_id = sandbox.id
        with pytest.raises(CheckpointNotFoundError):
            sandbox.rollback(checkpoint)
        assert sandbox.id == instance_id  # the old instance stays, still usable
        assert sandbox.read_text("state.txt") == "now"
        (result,) = SandboxRuntime.from_checkpoint(checkpoint, options=options)
        assert isinstance(result.error, CheckpointNotFoundError)


def test_rollback_replaces_the_instance(emulator: AgsEmulator) -> None:
    with SandboxRuntime(_config(emulator)) as sandbox:
        sandbox.write_text("state.txt", "checkpointed")
        checkpoint = sandbox.checkpoint()
        sandbox.write_text("state.txt", "changed")
        old = sandbox.id
        sandbox.rollback(checkpoint)
        assert sandbox.id != old  # a new instance, as on docker
        assert _status(emulator, old) == "STOPPED"
        assert sandbox.read_text("state.txt") == "checkpointed"
        started = emulator.service.store.instance(sandbox.id)
        assert started.metadata["sandbox-runtime.managed"] == "true"
    delete_checkpoint(checkpoint, options=_config(emulator).options)


def test_quota_and_rate_limit_answers(emulator: AgsEmulator) -> None:
    options = _config(emulator).options
    with SandboxRuntime(_config(emulator)) as sandbox:
        emulator.faults.inject(
            "error",
            plane="cloud",
            operation="CreateSandboxSnapshot",
            code="LimitExceeded.SandboxSnapshot",
        )
        with pytest.raises(BackendError, match="quota is used up"):
            sandbox.checkpoint()
        # A rate-limit answer is retried under the shared limiter: the checkpoint is made.
        emulator.faults.inject("rate_limit", plane="cloud", operation="CreateSandboxSnapshot")
        checkpoint = sandbox.checkpoint()
        assert len(emulator.faults.requests("cloud", "CreateSandboxSnapshot")) == 3
    delete_checkpoint(checkpoint, options=options)


def test_reap_deletes_expired_snapshots_only(emulator: AgsEmulator) -> None:
    options = _config(emulator).options
    backend_cls = load_backend("ags")
    with SandboxRuntime(_config(emulator)) as sandbox:
        short = sandbox.checkpoint(lifetime=1)
        kept = sandbox.checkpoint()
        time.sleep(2.1)  # expiry labels are whole seconds
        coerced = sandbox.backend.options
        dry = backend_cls.reap(coerced, dry_run=True)
        assert [(r.sandbox_id, r.reason) for r in dry if r.sandbox_id in (short.id, kept.id)] == [
            (short.id, "checkpoint: expired")
        ]
        assert short.id in emulator.service.store.snapshots  # dry: nothing removed
        backend_cls.reap(coerced)
        assert short.id not in emulator.service.store.snapshots
        assert kept.id in emulator.service.store.snapshots
    delete_checkpoint(kept, options=options)
