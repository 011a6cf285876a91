"""Docker checkpoints beyond the conformance canary: reaping, in-use images, a paused close,
a fork's own checkpoint, all against the real engine."""

from __future__ import annotations

import time

import docker
import pytest

from sandbox_runtime import (
    BackendError,
    CheckpointNotFoundError,
    SandboxRuntime,
    delete_checkpoint,
    list_checkpoints,
)
from sandbox_runtime.backends.docker import DockerBackend
from tests.conftest import DOCKER_IMAGE

pytestmark = pytest.mark.docker


def _sandbox() -> SandboxRuntime:
    return SandboxRuntime(backend="docker", image=DOCKER_IMAGE, workdir="/testbed", lifetime=300)


def _image_exists(image_id: str) -> bool:
    try:
        docker.from_env().images.get(image_id)
    except docker.errors.ImageNotFound:
        return False
    return True


def test_an_expired_checkpoint_is_reaped_and_a_live_one_kept() -> None:
    with _sandbox() as sandbox:
        sandbox.write_text("a.txt", "a")
        expired = sandbox.checkpoint(lifetime=1)
        kept = sandbox.checkpoint(labels={"keep": "yes"})
        time.sleep(1.5)
        reaped = DockerBackend.reap(dry_run=False)
        reasons = {item.sandbox_id: item.reason for item in reaped}
        assert reasons.get(expired.id) == "checkpoint: expired"
        assert kept.id not in reasons
        assert not _image_exists(expired.id)
        assert [item.id for item in list_checkpoints("docker", labels={"keep": "yes"})] == [kept.id]
    delete_checkpoint(kept)
    assert not _image_exists(kept.id)


def test_a_checkpoint_in_use_is_refused_then_deleted_once_free() -> None:
    sandbox = _sandbox().start()
    checkpoint = sandbox.checkpoint()
    sandbox.rollback(checkpoint)  # the sandbox now runs a container of that image
    with pytest.raises(BackendError, match="in use"):
        delete_checkpoint(checkpoint)
    sandbox.close()
    delete_checkpoint(checkpoint)
    assert not _image_exists(checkpoint.id)


def test_a_paused_sandbox_closes_and_its_fork_checkpoint_goes_at_close() -> None:
    sandbox = _sandbox().start()
    sandbox.write_text("a.txt", "a")
    sandbox.pause()  # a fork of a paused sandbox: the consistent one
    (result,) = sandbox.fork(1)
    sandbox.resume()
    copy = result.unwrap()
    assert copy.read_text("a.txt") == "a"
    fork_checkpoints = [
        item.id
        for item in list_checkpoints("docker", labels={"sandbox-runtime-fork-of": sandbox.id})
    ]
    assert len(fork_checkpoints) == 1  # in use by the copy, so still there
    copy.pause()
    copy.close()  # a paused container is removed all the same
    assert not copy.is_alive()
    sandbox.close()
    assert not _image_exists(fork_checkpoints[0])


def test_a_deleted_checkpoint_is_not_found_at_once() -> None:
    """Once a registry pull of ``sha256:<id>``, retried, ending in ``ImagePullError``."""
    with _sandbox() as sandbox:
        checkpoint = sandbox.checkpoint()
    delete_checkpoint(checkpoint)
    began = time.monotonic()
    (result,) = SandboxRuntime.from_checkpoint(checkpoint, backend="docker", image=DOCKER_IMAGE)
    assert isinstance(result.error, CheckpointNotFoundError)
    assert time.monotonic() - began < 5
