"""Kubernetes checkpoints through CSI volume snapshots, against the emulator.

The emulator gets a default VolumeSnapshotClass, so the backend's ``auto`` method takes the
snapshot path: the workdir lives on a claim, a checkpoint is a ``VolumeSnapshot``, and a fork
or a rollback is a claim restored from it.  The checkpoint conformance tests run on this path
(the archive path runs them in ``tests/conformance/test_kubernetes.py``); the rest checks what
is particular to it: nothing goes through the client's archive store, the image's workdir is
seeded into a fresh claim, a deleted snapshot is ``CheckpointNotFoundError``, the method is
chosen as documented, and ``reap`` removes the snapshots and claims of a dead owner.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sandbox_runtime import (
    CheckpointNotFoundError,
    SandboxConfig,
    SandboxRuntime,
    delete_checkpoint,
    list_checkpoints,
)
from sandbox_runtime.backend_kit import load_backend
from sandbox_runtime.backend_kit.testing.checkpoints import (
    CheckpointConformance,
    workdir_manifest,
)
from sandbox_runtime.errors import ConfigError
from tests.conftest import kubernetes_problem, require

pytestmark = pytest.mark.docker

GROUP, VERSION = "snapshot.storage.k8s.io", "v1"


@pytest.fixture(scope="module")
def snapshot_emulator() -> Iterator[Any]:
    """An emulator with a default VolumeSnapshotClass, as a cluster with a CSI driver has."""
    require(kubernetes_problem())
    from sandbox_runtime_emulators.kubernetes import KubernetesEmulator

    with KubernetesEmulator() as running:
        running.add_snapshot_class()
        yield running


def _config(emulator: Any, image: str, store: Path, **options: Any) -> SandboxConfig:
    return SandboxConfig(
        backend="kubernetes",
        image=image,
        workdir="/testbed",
        lifetime=300,
        options={
            **emulator.backend_options(),
            "agent": "off",
            "checkpoint_dir": str(store),
            "checkpoint_method": "auto",  # the default is "archive" (docs/checkpoints.md)
            **options,
        },
    )


@pytest.fixture
def store(tmp_path: Path) -> Path:
    return tmp_path / "archives"


class TestSnapshotCheckpoints(CheckpointConformance):
    """The checkpoint, rollback and fork canaries on the snapshot path."""

    @pytest.fixture
    def sandbox_config(
        self, snapshot_emulator: Any, docker_image: str, store: Path
    ) -> SandboxConfig:
        return _config(snapshot_emulator, docker_image, store, checkpoint_method="snapshot")

    @pytest.fixture
    def sandbox(self, sandbox_config: SandboxConfig) -> Iterator[SandboxRuntime]:
        with SandboxRuntime(sandbox_config) as sandbox:
            yield sandbox


def _custom(emulator: Any, tmp_path: Path) -> tuple[Any, Any]:
    from kubernetes import client, config

    path = emulator.write_kubeconfig(tmp_path / "kubeconfig")
    loaders: Any = config
    api_client = loaders.new_client_from_config(str(path))
    return client.CoreV1Api(api_client), client.CustomObjectsApi(api_client)


def test_snapshot_path_seeds_the_workdir_and_keeps_nothing_on_the_client(
    snapshot_emulator: Any, docker_image: str, store: Path, tmp_path: Path
) -> None:
    core, custom = _custom(snapshot_emulator, tmp_path)
    config = _config(snapshot_emulator, docker_image, store).model_copy(
        update={"workdir": "/usr/local/share"}  # auto; the image has files there
    )
    with SandboxRuntime(config) as sandbox:
        # The claim mounted at the workdir would hide the image's files: the seed copied them.
        assert sandbox.exists("/usr/local/share/ca-certificates")
        pod = core.read_namespaced_pod(sandbox.id, "default")
        assert [c.name for c in pod.spec.init_containers] == ["seed"]
        assert pod.spec.volumes[0].persistent_volume_claim.claim_name == sandbox.id
        assert pod.status.init_container_statuses[0].state.terminated.exit_code == 0
        sandbox.write_text("a.txt", "one\n")
        before = workdir_manifest(sandbox)
        checkpoint = sandbox.checkpoint(labels={"case": "snap"})
        assert checkpoint.id.startswith("srt-snap-")
        snapshot = custom.get_namespaced_custom_object(
            GROUP, VERSION, "default", "volumesnapshots", checkpoint.id
        )
        assert snapshot["spec"]["source"]["persistentVolumeClaimName"] == sandbox.id
        assert not store.exists() or not any(store.iterdir())  # no archive anywhere
        listed = list_checkpoints("kubernetes", labels={"case": "snap"}, options=config.options)
        assert [item.id for item in listed] == [checkpoint.id]
        assert listed[0].workdir == "/usr/local/share"
        (result,) = SandboxRuntime.from_checkpoint(checkpoint, options=config.options)
        with result.unwrap() as copy:
            assert workdir_manifest(copy) == before
            pod = core.read_namespaced_pod(copy.id, "default")
            assert not pod.spec.init_containers  # restored, not seeded
        delete_checkpoint(checkpoint, options=config.options)
        with pytest.raises(CheckpointNotFoundError):
            delete_checkpoint(checkpoint, options=config.options)
        (failed,) = SandboxRuntime.from_checkpoint(checkpoint, options=config.options)
        with pytest.raises(CheckpointNotFoundError):
            failed.unwrap()
        with pytest.raises(CheckpointNotFoundError):
            sandbox.rollback(checkpoint)
        claim = sandbox.id
    # Closing the sandbox deleted its claim.
    claims = [
        c.metadata.name for c in core.list_namespaced_persistent_volume_claim("default").items
    ]
    assert claim not in claims


def test_the_method_is_chosen_as_documented(
    snapshot_emulator: Any, docker_image: str, store: Path
) -> None:
    archive = _config(snapshot_emulator, docker_image, store, checkpoint_method="archive")
    with SandboxRuntime(archive) as sandbox:
        checkpoint = sandbox.checkpoint()
        assert checkpoint.id.startswith("ckpt-")
    delete_checkpoint(checkpoint, options=archive.options)
    # The default is the archive path, even where the cluster has a snapshot class.
    auto = _config(snapshot_emulator, docker_image, store)
    options = {k: v for k, v in dict(auto.options).items() if k != "checkpoint_method"}
    default = auto.model_copy(update={"options": options})
    with SandboxRuntime(default) as sandbox:
        assert sandbox.backend._claim is None  # type: ignore[attr-defined]
    # Declared paths outside the workdir: auto takes the archive, snapshot is refused.
    paths = _config(snapshot_emulator, docker_image, store).model_copy(
        update={"checkpoint_paths": ["/opt/data"]}
    )
    with SandboxRuntime(paths) as sandbox:
        assert sandbox.backend._claim is None  # type: ignore[attr-defined]
    forced = paths.model_copy(
        update={"options": {**paths.options, "checkpoint_method": "snapshot"}}  # type: ignore[dict-item]
    )
    with pytest.raises(ConfigError, match="checkpoint_paths"):
        SandboxRuntime(forced).start()
    # A class that the cluster does not have is refused by name (without any class, auto is
    # the archive path: the conformance suite runs there, tests/conformance/test_kubernetes.py).
    missing = _config(snapshot_emulator, docker_image, store, volume_snapshot_class="missing")
    with pytest.raises(ConfigError, match="no VolumeSnapshotClass 'missing'"):
        SandboxRuntime(missing).start()


def test_reap_removes_snapshots_and_claims_of_a_dead_owner(
    snapshot_emulator: Any, docker_image: str, store: Path, tmp_path: Path
) -> None:
    core, _custom_api = _custom(snapshot_emulator, tmp_path)
    config = _config(snapshot_emulator, docker_image, store, name_prefix="reap-snap-")
    sandbox = SandboxRuntime(config)
    sandbox.start()
    checkpoint = sandbox.checkpoint()
    claim = sandbox.id
    # As if its owner died: a pid that no process has (the emulator serves no PATCH, so the
    # stored objects are rewritten in place).
    dead = {"sandbox-runtime.io/owner-pid": "4194304", "sandbox-runtime.io/owner-start": "1"}
    for table, name in (("snapshots", checkpoint.id), ("claims", claim)):
        objects = getattr(snapshot_emulator.store.volumes, table)
        objects.update(
            "default",
            name,
            lambda obj: (
                obj["metadata"]["annotations"].update(dead),
                obj["metadata"]["labels"].update(dead),
            ),
        )
    backend = load_backend("kubernetes")
    options = backend.coerce_options(backend.options_model(**config.options))  # type: ignore[arg-type]
    reasons = {item.sandbox_id: item.reason for item in backend.reap(options)}
    assert reasons[checkpoint.id].startswith("checkpoint: ")
    assert reasons[claim].startswith("claim: ")
    with pytest.raises(CheckpointNotFoundError):
        delete_checkpoint(checkpoint, options=config.options)
    claims = [
        c.metadata.name for c in core.list_namespaced_persistent_volume_claim("default").items
    ]
    assert claim not in claims
    sandbox.close()
