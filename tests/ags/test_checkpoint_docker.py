"""Snapshots, forks and pauses of Docker instances: the whole filesystem, by ``docker commit``.

Files outside ``/home/user`` (a task's ``/testbed``), deletions of the image's files and
modes survive; the committed images go when the snapshot is deleted or the emulator closes.
"""

from __future__ import annotations

from collections.abc import Iterator

import docker
import pytest
from e2b import Sandbox

from sandbox_runtime_emulators.ags._seed import SNAPSHOT_REPOSITORY
from sandbox_runtime_emulators.ags.server import AgsEmulator

pytestmark = [pytest.mark.docker, pytest.mark.e2b_sdk, pytest.mark.e2b_current]  # fork, snapshots

_STATE = (
    "mkdir -p /testbed && echo built > /testbed/out.txt && chmod 750 /testbed/out.txt"
    " && rm /etc/debian_version"
)
_CHECK = (
    "cat /testbed/out.txt; stat -c %a /testbed/out.txt; test -e /etc/debian_version || echo gone"
)


@pytest.fixture(scope="module")
def docker_emulator(docker_image: str) -> Iterator[AgsEmulator]:
    with AgsEmulator(backend="docker", default_image=docker_image) as running:
        yield running


def _opts(emulator: AgsEmulator) -> dict[str, str]:
    return {"api_key": emulator.api_key, "api_url": emulator.url, "sandbox_url": emulator.url}


def _snapshot_images() -> set[str]:
    client = docker.from_env()
    try:
        return {tag for image in client.images.list(SNAPSHOT_REPOSITORY) for tag in image.tags}
    finally:
        client.close()


def test_fork_and_snapshot_keep_the_whole_filesystem(docker_emulator: AgsEmulator) -> None:
    before = _snapshot_images()
    source = Sandbox.create(template="default", timeout=120, **_opts(docker_emulator))
    made: list[Sandbox] = []
    try:
        source.commands.run(_STATE, user="root")
        snapshot = source.create_snapshot()
        forks = source.fork(count=2)
        made += [f for f in forks if isinstance(f, Sandbox)]
        assert len(made) == 2
        made.append(Sandbox.create(snapshot.snapshot_id, **_opts(docker_emulator)))
        for copy in made:
            assert copy.commands.run(_CHECK).stdout == "built\n750\ngone\n"
        made[0].commands.run("echo changed > /testbed/out.txt", user="root")
        assert made[1].commands.run("cat /testbed/out.txt").stdout == "built\n"
        assert source.commands.run("cat /testbed/out.txt").stdout == "built\n"
        assert len(_snapshot_images() - before) == 2  # one for the snapshot, one for the fork
    finally:
        for copy in made:
            copy.kill()
        source.kill()
    Sandbox.delete_snapshot(snapshot.snapshot_id, **_opts(docker_emulator))
    assert len(_snapshot_images() - before) == 1  # the fork's image goes at close


def test_pause_and_resume_keep_the_whole_filesystem(docker_emulator: AgsEmulator) -> None:
    sandbox = Sandbox.create(template="default", timeout=120, **_opts(docker_emulator))
    try:
        sandbox.commands.run(_STATE, user="root")
        sandbox.commands.run("sleep 600", background=True)
        assert sandbox.pause()
        assert not sandbox.is_running()
        resumed = sandbox.connect()
        assert resumed.commands.run(_CHECK).stdout == "built\n750\ngone\n"
        # Processes are not kept: the emulator keeps files only (docs/ags-emulator.md).
        assert "sleep 600" not in resumed.commands.run("ps -eo args").stdout
    finally:
        sandbox.kill()
