"""Conformance of checkpoints, rollback, forks and pause, with the determinism canary.

A copy that is not what it claims to be biases every reward computed in it, silently; so
each promise here is checked by content, not by the absence of an error.  The canary is a
manifest of the workdir: every path with its mode, each file's SHA-256, each symlink's
target (so deletions and additions show as missing or extra lines), and ``git status
--porcelain`` and ``HEAD`` of the repository there.  After a rollback, and in each fork, it
must equal the source's at checkpoint time; and copies must be independent afterwards.

A backend that does not declare a capability must refuse its calls with
:class:`~sandbox_runtime.CapabilityUnsupportedError`, which the same tests check instead.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from sandbox_runtime import (
    Capability,
    CapabilityUnsupportedError,
    CheckpointNotFoundError,
    SandboxConfig,
    SandboxRuntime,
    delete_checkpoint,
    list_checkpoints,
    load_backend,
)

__all__ = ["COUNTER_COMMAND", "CheckpointConformance", "wait_for", "workdir_manifest"]

#: A background counter, ten a second, into ``counter.txt`` (``mv``: a reader never sees the
#: file half written): what the pause checks watch stand still, then run again.
COUNTER_COMMAND = "i=0; while :; do i=$((i+1)); echo $i > .c && mv .c counter.txt; sleep 0.1; done"

_GIT = "git -c user.email=t@example.com -c user.name=t -c init.defaultBranch=main"

# GNU find: one line per entry, then each file's hash; sorted, so the order is the bytes'.
_MANIFEST = r"""
find . -path ./.git -prune -o \( -type l -printf 'L %p -> %l\n' \) \
  -o \( -type f -printf 'F %p %m\n' \) -o \( -type d -printf 'D %p %m\n' \) > /tmp/.manifest.$$
find . -path ./.git -prune -o -type f -exec sha256sum {} + >> /tmp/.manifest.$$
LC_ALL=C sort /tmp/.manifest.$$; rm -f /tmp/.manifest.$$
if [ -d .git ]; then
  echo "git HEAD $(git -c safe.directory='*' rev-parse HEAD)"
  git -c safe.directory='*' status --porcelain | sed 's/^/git /'
fi
"""


def workdir_manifest(sandbox: SandboxRuntime) -> str:
    """The canary's manifest of the sandbox's workdir (see the module docstring)."""
    return sandbox.exec(_MANIFEST, check=True).stdout


def _declares(sandbox: SandboxRuntime, capability: Capability) -> bool:
    backend = sandbox.backend
    return capability in backend.capabilities_for(backend.options)


def _prepare(sandbox: SandboxRuntime) -> None:
    """A workdir with a repository, modes, symlinks, and changes git sees."""
    sandbox.write_text("src/app.py", "def answer():\n    return 41\n")
    sandbox.write_text("run.sh", "#!/bin/sh\necho run\n", mode=0o755)
    sandbox.write_text("gone.txt", "to be deleted\n")
    sandbox.write_text("same-size.txt", "aaaa\n")
    sandbox.write_text("data/kept.txt", "a directory that becomes a file\n")
    sandbox.write_text("becomes-dir.txt", "a file that becomes a directory\n")
    sandbox.exec(f"{_GIT} init -q . && {_GIT} add -A && {_GIT} commit -qm base", check=True)
    sandbox.exec("ln -s src/app.py link.py && rm gone.txt && echo new > untracked.txt", check=True)
    sandbox.write_text("src/app.py", "def answer():\n    return 42\n")


def _disturb(sandbox: SandboxRuntime) -> None:
    """Change everything the manifest covers.

    Including an in-place edit that keeps the file's size and mtime (a rollback that trusted
    size and mtime would keep it), a directory replaced by a file and a file by a directory.
    """
    sandbox.exec(
        "echo changed > src/app.py && chmod 600 run.sh && rm untracked.txt && "
        "ln -sfn run.sh link.py && echo back > gone.txt && mkdir -p extra && echo x > extra/y && "
        "cp -p same-size.txt /tmp/.same-size && printf 'bbbb\\n' > same-size.txt && "
        "touch -r /tmp/.same-size same-size.txt && rm /tmp/.same-size && "
        "rm -r data && echo now-a-file > data && "
        "rm becomes-dir.txt && mkdir becomes-dir.txt && echo in > becomes-dir.txt/in && "
        f"{_GIT} add -A && {_GIT} commit -qm agent",
        check=True,
    )


def _options(config: SandboxConfig) -> Any:
    return config.options


class CheckpointConformance:
    """Mixin of the checkpoint / fork / pause tests (``SandboxConformance`` includes it)."""

    def test_checkpoint_and_rollback_restore_the_workdir_exactly(
        self, sandbox: SandboxRuntime
    ) -> None:
        if not _declares(sandbox, Capability.CHECKPOINT_FILESYSTEM):
            with pytest.raises(CapabilityUnsupportedError):
                sandbox.checkpoint()
            return
        _prepare(sandbox)
        before = workdir_manifest(sandbox)
        assert "git ?? untracked.txt" in before
        assert "L ./link.py -> src/app.py" in before
        checkpoint = sandbox.checkpoint(labels={"canary": "rollback"})
        assert checkpoint.backend == sandbox.config.backend
        assert checkpoint.kind in ("filesystem", "memory")
        assert checkpoint.workdir == sandbox.workdir
        _disturb(sandbox)
        assert workdir_manifest(sandbox) != before
        sandbox.rollback(checkpoint)
        assert workdir_manifest(sandbox) == before
        assert sandbox.exec("cat src/app.py").stdout == "def answer():\n    return 42\n"
        # Twice from the same checkpoint: a rollback does not consume it.
        _disturb(sandbox)
        sandbox.rollback(checkpoint)
        assert workdir_manifest(sandbox) == before
        self._check_listing_and_deletion(sandbox, checkpoint.id)
        sandbox.close()  # docker: the image is in use until the container goes
        delete_checkpoint(checkpoint, options=_options(sandbox.config))

    def _check_listing_and_deletion(self, sandbox: SandboxRuntime, checkpoint_id: str) -> None:
        backend, options = sandbox.config.backend, _options(sandbox.config)
        listed = list_checkpoints(backend, labels={"canary": "rollback"}, options=options)
        assert checkpoint_id in [item.id for item in listed]
        found = next(item for item in listed if item.id == checkpoint_id)
        assert found.labels == {"canary": "rollback"}
        assert found.expires_at is not None
        assert found.owner is not None
        reaped = load_backend(backend).reap(sandbox.backend.options, dry_run=True)
        assert checkpoint_id not in [item.sandbox_id for item in reaped]  # its owner lives
        # Taken off the sandbox, the checkpoint can go (docker: an image in use cannot).
        sandbox.exec("true")
        probe = sandbox.checkpoint(labels={"canary": "delete"})
        delete_checkpoint(probe, options=options)
        with pytest.raises(CheckpointNotFoundError):
            delete_checkpoint(probe, options=options)
        assert probe.id not in [item.id for item in list_checkpoints(backend, options=options)]

    def test_fork_copies_equal_the_source_and_are_independent(
        self, sandbox: SandboxRuntime
    ) -> None:
        if not _declares(sandbox, Capability.FORK):
            with pytest.raises(CapabilityUnsupportedError):
                sandbox.fork(2)
            return
        _prepare(sandbox)
        before = workdir_manifest(sandbox)
        results = sandbox.fork(2, labels={"canary": "fork"})
        copies = [result.unwrap() for result in results]
        try:
            assert [result.index for result in results] == [0, 1]
            assert len({sandbox.id, *(copy.id for copy in copies)}) == 3
            for copy in copies:
                assert copy.config.labels == {"canary": "fork"}
                assert workdir_manifest(copy) == before
            copies[0].write_text("only-in-first.txt", "1")
            sandbox.write_text("only-in-source.txt", "1")
            assert not copies[1].exists("only-in-first.txt")
            assert not sandbox.exists("only-in-first.txt")
            assert not copies[0].exists("only-in-source.txt")
            assert workdir_manifest(copies[1]) == before
            copies[1].close()
            assert copies[0].exec("cat only-in-first.txt").stdout == "1"
        finally:
            for copy in copies:
                copy.close()

    def test_checkpoint_outlives_its_sandbox(self, sandbox_config: SandboxConfig) -> None:
        with SandboxRuntime(sandbox_config) as source:
            if not _declares(source, Capability.FORK):
                return  # the fork test checked the typed error
            _prepare(source)
            before = workdir_manifest(source)
            checkpoint = source.checkpoint()
        try:
            (result,) = SandboxRuntime.from_checkpoint(checkpoint, options=sandbox_config.options)
            with result.unwrap() as copy:
                assert copy.workdir == checkpoint.workdir
                assert workdir_manifest(copy) == before
        finally:
            delete_checkpoint(checkpoint, options=sandbox_config.options)

    def test_pause_keeps_a_running_process(self, sandbox: SandboxRuntime) -> None:
        if not _declares(sandbox, Capability.PAUSE):
            with pytest.raises(CapabilityUnsupportedError):
                sandbox.pause()
            return
        counter = sandbox.exec_background(COUNTER_COMMAND)
        try:
            wait_for(lambda: sandbox.exists("counter.txt"))
            at_pause = int(sandbox.read_text("counter.txt"))
            sandbox.pause()
            assert sandbox.paused
            time.sleep(3)  # at 10 a second, a running counter would gain ~30
            sandbox.resume()
            at_resume = int(sandbox.read_text("counter.txt"))
            # It stood still (the margin is for the moments around pause and resume)...
            assert at_resume - at_pause <= 10, (at_pause, at_resume)
            wait_for(lambda: int(sandbox.read_text("counter.txt")) > at_resume + 3)  # ... then ran
            assert not counter.done  # the same process, not a new one
        finally:
            counter.kill()


def wait_for(condition: Any, timeout: float = 20.0) -> None:
    """Poll ``condition`` every 0.1 s until it holds; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.1)
