"""The unmodified e2b SDK's pause, resume, connect-to-paused, snapshot and fork calls.

Tests marked ``e2b_current`` use calls e2b 2.15.2 lacks (``fork``, ``create_snapshot``'s
``names``, ``lifecycle``, an instance's ``connect`` that keeps its options).  The routes are
those e2b 2.63 calls (``/sandboxes/{id}/pause|resume|snapshots|fork``,
``/v2/sandboxes/{id}/connect``, ``GET /snapshots``, ``DELETE /templates/{id}``).
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import e2b
import httpx
import pytest
from e2b import Sandbox

from sandbox_runtime_emulators.ags.server import AgsEmulator

pytestmark = pytest.mark.e2b_sdk


def _opts(emulator: AgsEmulator) -> dict[str, str]:
    return {"api_key": emulator.api_key, "api_url": emulator.url, "sandbox_url": emulator.url}


@pytest.fixture
def sandbox(emulator: AgsEmulator) -> Iterator[Sandbox]:
    created = Sandbox.create(template="default", timeout=120, **_opts(emulator))
    try:
        yield created
    finally:
        created.kill()


@pytest.mark.e2b_current
def test_pause_then_connect_resumes_with_files(emulator: AgsEmulator, sandbox: Sandbox) -> None:
    sandbox.files.write("/home/user/kept.txt", "kept across the pause")
    assert sandbox.pause() is True
    assert not sandbox.is_running()
    info = Sandbox.get_info(sandbox.sandbox_id, **_opts(emulator))
    assert info.state.value == "paused"
    listed = Sandbox.list(**_opts(emulator)).next_items()
    assert any(s.sandbox_id == sandbox.sandbox_id for s in listed)
    assert sandbox.pause() is False  # already paused: the route answers 409
    resumed = sandbox.connect()
    assert resumed.is_running()
    assert resumed.sandbox_id == sandbox.sandbox_id
    assert resumed.files.read("/home/user/kept.txt") == "kept across the pause"
    # A new sandbox in every way but its files: processes are not kept.
    assert Sandbox.get_info(sandbox.sandbox_id, **_opts(emulator)).state.value == "running"


def test_pause_by_id_and_class_connect(emulator: AgsEmulator, sandbox: Sandbox) -> None:
    Sandbox.pause(sandbox.sandbox_id, **_opts(emulator))
    assert not sandbox.is_running()
    connected = Sandbox.connect(sandbox.sandbox_id, timeout=60, **_opts(emulator))
    assert connected.is_running()
    assert sandbox.is_running()


def test_resume_route_of_older_sdks(emulator: AgsEmulator, sandbox: Sandbox) -> None:
    headers = {"X-API-KEY": emulator.api_key}
    url = f"{emulator.url}/sandboxes/{sandbox.sandbox_id}"
    assert httpx.post(f"{url}/resume", json={}, headers=headers).status_code == 409
    assert httpx.post(f"{url}/pause", json={}, headers=headers).status_code == 204
    resumed = httpx.post(f"{url}/resume", json={"timeout": 60}, headers=headers)
    assert resumed.status_code == 201
    assert resumed.json()["sandboxID"] == sandbox.sandbox_id
    assert resumed.json()["envdAccessToken"] == sandbox._envd_access_token
    assert httpx.post(f"{emulator.url}/sandboxes/sbi-none/pause", headers=headers).status_code == (
        404
    )


@pytest.mark.e2b_current
def test_snapshot_starts_independent_sandboxes(emulator: AgsEmulator, sandbox: Sandbox) -> None:
    sandbox.files.write("/home/user/app/config.json", '{"env": "test"}')
    snapshot = sandbox.create_snapshot(name="after-setup")
    assert snapshot.snapshot_id.startswith("snap-")
    assert snapshot.names == ["after-setup"]
    copies = [Sandbox.create(snapshot.snapshot_id, **_opts(emulator)) for _ in range(2)]
    try:
        first, second = copies
        assert first.files.read("/home/user/app/config.json") == '{"env": "test"}'
        first.files.write("/home/user/app/config.json", "changed")
        assert second.files.read("/home/user/app/config.json") == '{"env": "test"}'
        assert sandbox.files.read("/home/user/app/config.json") == '{"env": "test"}'
        mine = Sandbox.list_snapshots(sandbox_id=sandbox.sandbox_id, **_opts(emulator))
        assert [s.snapshot_id for s in mine.next_items()] == [snapshot.snapshot_id]
        named = Sandbox.list_snapshots(name="no-such-name", **_opts(emulator))
        assert named.next_items() == []
    finally:
        for copy in copies:
            copy.kill()
    assert Sandbox.delete_snapshot(snapshot.snapshot_id, **_opts(emulator)) is True
    assert Sandbox.delete_snapshot(snapshot.snapshot_id, **_opts(emulator)) is False
    with pytest.raises(e2b.SandboxException):
        Sandbox.create(snapshot.snapshot_id, **_opts(emulator))


@pytest.mark.e2b_current
def test_fork_copies_files_and_copies_are_independent(sandbox: Sandbox) -> None:
    sandbox.files.write("/home/user/state.txt", "before fork")
    forks = sandbox.fork(count=3, timeout=60)
    made = [f for f in forks if isinstance(f, Sandbox)]
    try:
        assert len(made) == 3
        assert len({f.sandbox_id for f in made} | {sandbox.sandbox_id}) == 4
        for fork in made:
            assert fork.files.read("/home/user/state.txt") == "before fork"
        made[0].files.write("/home/user/state.txt", "changed in one fork")
        assert made[1].files.read("/home/user/state.txt") == "before fork"
        assert sandbox.files.read("/home/user/state.txt") == "before fork"
        assert sandbox.is_running()
    finally:
        for fork in made:
            fork.kill()


@pytest.mark.e2b_current
def test_fork_errors(emulator: AgsEmulator, sandbox: Sandbox) -> None:
    headers = {"X-API-KEY": emulator.api_key}
    url = f"{emulator.url}/sandboxes/{sandbox.sandbox_id}/fork"
    assert httpx.post(url, json={"count": 101}, headers=headers).status_code == 400
    sandbox.kill()
    with pytest.raises(e2b.SandboxNotFoundException):
        sandbox.fork()


@pytest.mark.e2b_current
def test_fork_reports_each_copy_past_the_quota(emulator: AgsEmulator, sandbox: Sandbox) -> None:
    quota = emulator.service.limits.max_instances
    emulator.service.limits.max_instances = 2  # the source and one copy
    try:
        forks = sandbox.fork(count=2)
    finally:
        emulator.service.limits.max_instances = quota
    made = [f for f in forks if isinstance(f, Sandbox)]
    failed = [f for f in forks if isinstance(f, Exception)]
    try:
        assert (len(made), len(failed)) == (1, 1)
        assert isinstance(failed[0], e2b.RateLimitException)
    finally:
        for fork in made:
            fork.kill()


@pytest.mark.e2b_current
def test_auto_pause_pauses_at_the_end_of_the_lifetime(emulator: AgsEmulator) -> None:
    sandbox = Sandbox.create(
        template="default", timeout=1, lifecycle={"on_timeout": "pause"}, **_opts(emulator)
    )
    try:
        sandbox.files.write("/home/user/kept.txt", "auto")
        deadline = time.monotonic() + 10
        while sandbox.is_running() and time.monotonic() < deadline:
            time.sleep(0.1)
        info = Sandbox.get_info(sandbox.sandbox_id, **_opts(emulator))
        assert info.state.value == "paused"  # not killed
        resumed = sandbox.connect(timeout=60)
        assert resumed.files.read("/home/user/kept.txt") == "auto"
    finally:
        sandbox.kill()
