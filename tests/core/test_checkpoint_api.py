"""The checkpoint / fork / pause API's contract: typed errors, handles, reaping.

The behaviour on real backends is in the conformance suite (``CheckpointConformance``);
this file checks what holds whatever the backend: a backend without a capability refuses
its calls with :class:`CapabilityUnsupportedError` naming it, the handle round-trips its
labels, and expired or orphaned local checkpoints are reaped.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from sandbox_runtime import (
    Capability,
    CapabilityUnsupportedError,
    Checkpoint,
    CheckpointNotFoundError,
    ConfigError,
    ForkResult,
    SandboxError,
    SandboxRuntime,
    delete_checkpoint,
    list_checkpoints,
)
from sandbox_runtime.backend_kit import Backend, checkpoint_labels
from sandbox_runtime.backends.local import LocalBackend

_WITHOUT = (
    Capability.CHECKPOINT_FILESYSTEM,
    Capability.CHECKPOINT_MEMORY,
    Capability.FORK,
    Capability.PAUSE,
)


class PlainBackend(LocalBackend):
    """``local`` without checkpoints, forks or pause: the contract's defaults throughout."""

    name = "plain"
    capabilities = LocalBackend.capabilities - frozenset(_WITHOUT)
    checkpoint = Backend.checkpoint
    rollback = Backend.rollback
    start_from_checkpoint = Backend.start_from_checkpoint
    pause = Backend.pause
    resume = Backend.resume
    list_checkpoints = Backend.__dict__["list_checkpoints"]
    delete_checkpoint = Backend.__dict__["delete_checkpoint"]


_PLAIN = f"{__name__}:PlainBackend"


@pytest.fixture
def plain(tmp_path: Path) -> SandboxRuntime:
    sandbox = SandboxRuntime(backend=_PLAIN, options={"base_dir": tmp_path})
    return sandbox.start()


@pytest.fixture
def local(tmp_path: Path) -> SandboxRuntime:
    return SandboxRuntime(backend="local", options={"base_dir": tmp_path}).start()


def _handle(backend: str = "local") -> Checkpoint:
    labels = checkpoint_labels(
        source_id="local-x", kind="filesystem", lifetime=60, run_id=None, labels={}, workdir="/w"
    )
    return Checkpoint.from_labels(backend, "local-ckpt-0000000000000000", labels)


def test_every_call_names_the_missing_capability_and_the_backend(plain: SandboxRuntime) -> None:
    calls: dict[str, list[Callable[[], object]]] = {
        "checkpoint_filesystem": [plain.checkpoint, lambda: plain.rollback(_handle(_PLAIN))],
        "fork": [lambda: plain.fork(2)],
        "pause": [plain.pause],
    }
    for capability, attempts in calls.items():
        for attempt in attempts:
            with pytest.raises(CapabilityUnsupportedError) as raised:
                attempt()
            assert raised.value.capability == capability
            assert raised.value.backend == _PLAIN
            assert capability in str(raised.value)
    plain.close()


def test_the_contract_defaults_raise_the_typed_error(plain: SandboxRuntime) -> None:
    backend = plain.backend
    for call in (
        lambda: backend.checkpoint({}, 60),
        lambda: backend.rollback(_handle()),
        lambda: backend.start_from_checkpoint(_handle()),
        backend.pause,
        backend.resume,
        lambda: PlainBackend.list_checkpoints(),
        lambda: PlainBackend.delete_checkpoint("x"),
    ):
        with pytest.raises(CapabilityUnsupportedError, match="plain"):
            call()
    with pytest.raises(CapabilityUnsupportedError):
        list_checkpoints(_PLAIN)
    plain.close()


def test_from_checkpoint_on_a_backend_without_fork_fails_each_copy() -> None:
    results = SandboxRuntime.from_checkpoint(_handle(_PLAIN), n=2)
    assert [result.index for result in results] == [0, 1]
    for result in results:
        assert not result.ok
        assert isinstance(result.error, CapabilityUnsupportedError)
        with pytest.raises(CapabilityUnsupportedError):
            result.unwrap()


def test_bad_arguments_are_config_errors(local: SandboxRuntime) -> None:
    with pytest.raises(ConfigError):
        SandboxRuntime.from_checkpoint(_handle(), n=0)
    with pytest.raises(ConfigError):
        local.rollback(_handle("docker"))
    with pytest.raises(ConfigError):
        local.checkpoint(lifetime=-1)
    with pytest.raises(ConfigError):
        delete_checkpoint("local-ckpt-0")
    with pytest.raises(CheckpointNotFoundError):
        local.rollback(_handle())
    local.close()


def test_a_paused_sandbox_refuses_calls_until_resumed(local: SandboxRuntime) -> None:
    local.write_text("a.txt", "a")
    local.pause()
    with pytest.raises(SandboxError, match="paused"):
        local.exec("true")
    with pytest.raises(SandboxError, match="paused"):
        local.read_text("a.txt")
    checkpoint = local.checkpoint()  # allowed: nothing writes while it is taken
    (copy,) = local.fork(1)  # so is a fork
    assert copy.unwrap().read_text("a.txt") == "a"
    copy.unwrap().close()
    local.resume()
    local.resume()  # harmless when running
    assert local.exec("echo on").stdout == "on\n"
    delete_checkpoint(checkpoint, options=local.config.options)
    local.close()


def test_the_handle_keeps_labels_owner_and_expiry(local: SandboxRuntime) -> None:
    checkpoint = local.checkpoint(labels={"task": "a b", "quote": 'say "hi"'}, lifetime=120)
    assert checkpoint.labels == {"task": "a b", "quote": 'say "hi"'}
    assert checkpoint.source_id == local.id
    assert checkpoint.expires_at is not None
    assert checkpoint.expires_at - checkpoint.created.timestamp() == pytest.approx(120, abs=2)
    listed = list_checkpoints("local", labels={"task": "a b"}, options=local.config.options)
    assert [item.id for item in listed] == [checkpoint.id]
    local.close()
    (copy,) = SandboxRuntime.from_checkpoint(checkpoint, options=local.config.options)
    assert isinstance(copy, ForkResult)
    copy.unwrap().close()
    delete_checkpoint(checkpoint, options=local.config.options)
    assert list_checkpoints("local", options=local.config.options) == []


def test_expired_local_checkpoints_are_reaped(local: SandboxRuntime, tmp_path: Path) -> None:
    kept = local.checkpoint()
    expired = local.checkpoint()
    meta_path = tmp_path / f"ckpt-{expired.id.removeprefix('local-ckpt-')}" / "meta.json"
    meta = json.loads(meta_path.read_text())
    meta["labels"]["sandbox-runtime.expires-at"] = str(int(time.time()) - 1)
    meta_path.write_text(json.dumps(meta))
    dry = LocalBackend.reap(local.backend.options, dry_run=True)
    assert [(item.sandbox_id, item.reason) for item in dry] == [(expired.id, "checkpoint: expired")]
    assert meta_path.exists()
    LocalBackend.reap(local.backend.options)
    assert not meta_path.exists()
    assert [item.id for item in list_checkpoints("local", options=local.config.options)] == [
        kept.id
    ]
    local.close()
