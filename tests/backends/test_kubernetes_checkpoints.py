"""Kubernetes checkpoints through the archive store, against the emulator's pods.

The conformance suite's canary covers the workdir; these cover what is particular to the
store: declared paths (a directory, a file, one that did not exist), what is not kept (the
image's side), the store's directory, reaping of expired, ownerless and unfinished
checkpoints, and the refusal of an archive whose members leave the captured path.
"""

from __future__ import annotations

import io
import os
import tarfile
import time
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
from sandbox_runtime.backend_kit import (
    ArchiveCheckpointStore,
    default_checkpoint_root,
    load_backend,
    read_meta,
    write_meta,
)
from sandbox_runtime.errors import BackendError

pytestmark = pytest.mark.docker

_EXPIRES = "sandbox-runtime.expires-at"


@pytest.fixture
def config(k8s_emulator: Any, docker_image: str, tmp_path: Path) -> SandboxConfig:
    return SandboxConfig(
        backend="kubernetes",
        image=docker_image,
        workdir="/testbed",
        lifetime=300,
        checkpoint_paths=["/opt/data", "/etc/app.conf", "/srv/later"],
        options={**k8s_emulator.backend_options(), "checkpoint_dir": str(tmp_path / "store")},
    )


def test_declared_paths_are_restored_with_deletions_and_modes(config: SandboxConfig) -> None:
    with SandboxRuntime(config) as sandbox:
        sandbox.exec(
            "mkdir -p /opt/data/sub && echo a > /opt/data/a && echo b > /opt/data/sub/b && "
            "chmod 750 /opt/data && echo v1 > /etc/app.conf && echo w > work.txt",
            check=True,
        )
        checkpoint = sandbox.checkpoint(labels={"case": "paths"})
        assert checkpoint.size_bytes
        assert checkpoint.size_bytes > 0
        sandbox.exec(
            "rm -r /opt/data/sub && echo new > /opt/data/new && chmod 700 /opt/data && "
            "echo v2 > /etc/app.conf && mkdir -p /srv/later && echo x > /srv/later/x && "
            "rm work.txt && echo outside > /usr/local/outside.txt",
            check=True,
        )
        sandbox.rollback(checkpoint)
        listing = sandbox.exec(
            "cd /opt/data && find . | sort && stat -c %a . && cat /etc/app.conf && "
            "cat /testbed/work.txt && test ! -e /srv/later && echo later-gone",
            check=True,
        ).stdout.split()
        assert listing == [".", "./a", "./sub", "./sub/b", "750", "v1", "w", "later-gone"]
        # Outside the captured paths is the image's side: a rollback leaves it alone.
        assert sandbox.exists("/usr/local/outside.txt")
        results = sandbox.fork(1, labels={"copy": "1"})
        with results[0].unwrap() as copy:
            assert copy.read_text("/opt/data/sub/b") == "b\n"
            assert not copy.exists("/usr/local/outside.txt")  # a fresh pod of the image
    delete_checkpoint(checkpoint, options=config.options)


def test_a_rollback_of_few_changes_finds_a_change_that_kept_size_and_time(
    k8s_emulator: Any, docker_image: str, tmp_path: Path
) -> None:
    """Only the workdir is captured, so the rollback compares instead of rewriting all."""
    config = SandboxConfig(
        backend="kubernetes",
        image=docker_image,
        workdir="/testbed",
        options={**k8s_emulator.backend_options(), "checkpoint_dir": str(tmp_path)},
    )
    with SandboxRuntime(config) as sandbox:
        sandbox.exec(
            "mkdir -p d/e && for i in 1 2 3; do echo file$i > d/f$i; done && "
            "ln -s d/f1 link && echo keep > d/e/k && chmod 711 d/e",
            check=True,
        )
        checkpoint = sandbox.checkpoint()
        before = sandbox.exec("stat -c '%i %n' d/f2 d/f3", check=True).stdout
        # Same size, same modification time: only the content tells.
        sandbox.exec(
            "cp -p d/f1 /tmp/ref && printf X | dd of=d/f1 bs=1 seek=0 conv=notrunc 2>/dev/null && "
            "touch -r /tmp/ref d/f1 && rm -r d/e && ln -sfn d/f2 link && echo extra > d/new && "
            "rm d/f3 && mkdir d/f3 && chmod 700 d",
            check=True,
        )
        sandbox.rollback(checkpoint)
        state = sandbox.exec(
            "cat d/f1 d/f3 d/e/k && readlink link && stat -c %a d d/e && test ! -e d/new && "
            "stat -c '%i %n' d/f2",
            check=True,
        ).stdout.splitlines()
        assert state[:6] == ["file1", "file3", "keep", "d/f1", "755", "711"]
        # An unchanged file was not written again (its inode is the same).
        assert state[6] == before.splitlines()[0]
    delete_checkpoint(checkpoint, options=config.options)


def test_the_store_lives_where_the_options_say(config: SandboxConfig) -> None:
    with SandboxRuntime(config) as sandbox:
        checkpoint = sandbox.checkpoint()
    store = Path(config.options["checkpoint_dir"])  # type: ignore[index]
    assert (store / checkpoint.id / "data.tar").is_file()
    meta = read_meta(store / checkpoint.id)
    assert meta is not None
    assert meta["backend"] == "kubernetes"
    assert meta["image"] == config.image
    # A checkpoint of one backend is no other backend's.
    with pytest.raises(CheckpointNotFoundError):
        ArchiveCheckpointStore(store).delete(checkpoint.id, "e2b")
    # from_checkpoint after the source is gone takes the image from the record.
    (result,) = SandboxRuntime.from_checkpoint(checkpoint, options=config.options)
    with result.unwrap() as copy:
        assert copy.backend.config.image == config.image
    delete_checkpoint(checkpoint, options=config.options)


def test_default_root(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("SANDBOX_RUNTIME_CHECKPOINT_DIR", raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    assert default_checkpoint_root() == tmp_path / "state/sandbox-runtime/checkpoints"
    monkeypatch.setenv("SANDBOX_RUNTIME_CHECKPOINT_DIR", str(tmp_path / "env"))
    assert default_checkpoint_root() == tmp_path / "env"
    assert default_checkpoint_root(tmp_path / "given") == tmp_path / "given"


def test_reap_removes_expired_ownerless_and_unfinished_checkpoints(config: SandboxConfig) -> None:
    store = Path(config.options["checkpoint_dir"])  # type: ignore[index]
    with SandboxRuntime(config) as sandbox:
        kept = sandbox.checkpoint(labels={"case": "reap"})
        expired = sandbox.checkpoint(labels={"case": "reap"})
    meta = read_meta(store / expired.id)
    assert meta is not None
    meta["labels"][_EXPIRES] = str(int(time.time()) - 1)
    write_meta(store / expired.id, meta)
    unfinished = store / "ckpt-0123456789abcdef"
    unfinished.mkdir()
    os.utime(unfinished, (time.time() - 120, time.time() - 120))
    backend = load_backend("kubernetes")
    options = backend.coerce_options(backend.options_model(**config.options))  # type: ignore[arg-type]
    reasons = {item.sandbox_id: item.reason for item in backend.reap(options, dry_run=True)}
    assert reasons.get(expired.id) == "checkpoint: expired"
    assert reasons.get(unfinished.name) == "checkpoint: record missing"
    assert kept.id not in reasons  # its owner (this process) lives
    backend.reap(options)
    ids = [item.id for item in list_checkpoints("kubernetes", options=config.options)]
    assert ids == [kept.id]
    assert not unfinished.exists()
    delete_checkpoint(kept, options=config.options)


class _ArchiveOf:
    """A sandbox whose ``get_archive`` answers a given tar (the host-side check only)."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def get_archive(self, path: str) -> bytes:
        return self.data

    def put_archive(self, data: bytes) -> None:
        raise AssertionError("a capture never extracts")

    def exec(self, request: Any) -> Any:
        raise AssertionError("a capture runs no command")


def _tar(*names: str) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as out:
        for name in names:
            info = tarfile.TarInfo(name)
            info.type = tarfile.DIRTYPE if name == "testbed" else tarfile.REGTYPE
            out.addfile(info, io.BytesIO(b""))
    return buffer.getvalue()


@pytest.mark.parametrize("escape", ["testbed/../../etc/passwd", "other/file", "/etc/shadow"])
def test_an_archive_leaving_its_path_is_refused(tmp_path: Path, escape: str) -> None:
    store = ArchiveCheckpointStore(tmp_path)
    with pytest.raises(BackendError, match="outside /testbed"):
        store.capture(
            _ArchiveOf(_tar("testbed", escape)),
            ["/testbed"],
            backend_name="kubernetes",
            source_id="pod",
            image="image",
            labels={},
            lifetime=60,
        )
    assert list(tmp_path.iterdir()) == []  # nothing half made is left


def test_a_shared_r2e_setup_grades_in_a_copy_with_its_hidden_tests(
    k8s_emulator: Any, docker_image: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """rLLM's evaluator grades in a copy of the task's prepared state (``share_setup``).

    R2E-Gym's setup moves ``run_tests.sh`` and the held-out tests to ``/root``, outside the
    workdir: a copy restored from an archive of the workdir alone had no tests, and every
    R2E-Gym row ended as an error.  The format's prepared paths go into the archive.
    """
    pytest.importorskip("tomllib", reason="the rLLM flow's settings read TOML (Python 3.11+)")
    from sandbox_runtime.integrations.rllm_flow import evaluator
    from sandbox_runtime.integrations.rllm_flow.settings import FlowSettings
    from sandbox_runtime.swe.dataset import load_rows
    from sandbox_runtime.swe.images import build_sample_image
    from sandbox_runtime.swe.prepared import PreparedStates
    from sandbox_runtime.swe.rows import read_rows
    from tests.swe.conftest import task_named

    task = task_named(read_rows(load_rows("bundled")).tasks, "csvline", "r2e")
    build_sample_image("csvline", base=docker_image)
    settings = FlowSettings(
        backend="kubernetes",
        backend_options={
            **k8s_emulator.backend_options(),
            "checkpoint_dir": str(tmp_path / "store"),
        },
    )
    with PreparedStates() as shared:
        monkeypatch.setattr(evaluator, "SHARED_SETUPS", shared)
        gold = evaluator.grade_patch(task, task.gold_patch, settings)
        null = evaluator.grade_patch(task, "", settings)
        assert (gold.reward, null.reward) == (1.0, 0.0), (gold.reason, null.reason)
        assert (shared.setups, shared.copies) == (1, 2)
