"""envd's users (and a watch), in Docker instances, through the e2b SDK's public API.

envd runs commands and file operations as its default user unless a request names one
(``user=`` in the SDK); E2B's templates make that ``user``, with a home directory.  The
emulator does the same where the image has a ``user`` account, and keeps root where it has
none.  An image whose ``USER`` is not root still starts: envd itself runs as root, as the
real one does, so it can act as anyone.
"""

from __future__ import annotations

import contextlib
import io
import time
from collections.abc import Iterator

import e2b
import pytest
from e2b import Sandbox

from sandbox_runtime_emulators.ags.server import AgsEmulator

pytestmark = [pytest.mark.docker, pytest.mark.e2b_sdk]

WITH_USER = "srt-ags-test/with-user:1"
USER_IMAGE = "srt-ags-test/runs-as-user:1"


def _build(client: object, tag: str, dockerfile: str) -> str:
    image, _logs = client.images.build(  # type: ignore[attr-defined]
        fileobj=io.BytesIO(dockerfile.encode()), tag=tag, rm=True, pull=False
    )
    return str(image.id)


@pytest.fixture(scope="module")
def user_images(docker_image: str) -> Iterator[tuple[str, str]]:
    """The test image with a ``user`` account, and the same image with ``USER user``."""
    import docker

    client = docker.from_env()
    built = [
        _build(client, WITH_USER, f"FROM {docker_image}\nRUN useradd -m -s /bin/bash user\n"),
        _build(client, USER_IMAGE, f"FROM {WITH_USER}\nUSER user\n"),
    ]
    try:
        yield WITH_USER, USER_IMAGE
    finally:
        for image_id in reversed(built):
            with contextlib.suppress(docker.errors.APIError):
                client.images.remove(image_id, force=True)
        client.close()


@pytest.fixture(scope="module")
def emulator_with_users(user_images: tuple[str, str]) -> Iterator[AgsEmulator]:
    with_user, runs_as_user = user_images
    with AgsEmulator(backend="docker", default_image=with_user) as running:
        running.service.add_ready_tool("runs-as-user", runs_as_user)
        yield running


def _opts(emulator: AgsEmulator) -> dict[str, str]:
    return {"api_key": emulator.api_key, "api_url": emulator.url, "sandbox_url": emulator.url}


@pytest.fixture
def sandbox(emulator_with_users: AgsEmulator) -> Iterator[Sandbox]:
    created = Sandbox.create(template="default", timeout=120, **_opts(emulator_with_users))
    try:
        yield created
    finally:
        created.kill()


def test_commands_run_as_user_unless_one_is_given(sandbox: Sandbox) -> None:
    mine = sandbox.commands.run('whoami; echo "$HOME"; pwd')
    assert mine.stdout == "user\n/home/user\n/home/user\n"
    root = sandbox.commands.run('whoami; echo "$HOME"', user="root")
    assert root.stdout == "root\n/root\n"


def test_files_belong_to_the_user_and_relative_paths_start_at_home(sandbox: Sandbox) -> None:
    written = sandbox.files.write("notes.txt", "hello")
    assert written.path == "/home/user/notes.txt"
    sandbox.files.make_dir("~/deep/er")
    sandbox.files.write("/tmp/as-root.txt", "r", user="root")
    owners = sandbox.commands.run(
        "stat -c '%U %n' /home/user/notes.txt /home/user/deep /home/user/deep/er /tmp/as-root.txt"
    ).stdout.splitlines()
    assert owners == [
        "user /home/user/notes.txt",
        "user /home/user/deep",
        "user /home/user/deep/er",
        "root /tmp/as-root.txt",
    ]
    assert sandbox.files.get_info("~/notes.txt").owner == "user"
    # envd writes as root and then hands the file over, so even root's home takes it.
    sandbox.files.write("/root/handed-over.txt", "x")
    assert sandbox.files.get_info("/root/handed-over.txt").owner == "user"


def test_an_unknown_user_is_refused(sandbox: Sandbox) -> None:
    with pytest.raises((e2b.AuthenticationException, e2b.SandboxException)):
        sandbox.commands.run("true", user="no-such-account")


def test_an_image_whose_user_is_not_root_starts(emulator_with_users: AgsEmulator) -> None:
    created = Sandbox.create(template="runs-as-user", timeout=120, **_opts(emulator_with_users))
    try:
        assert created.commands.run("whoami").stdout == "user\n"
        assert created.commands.run("id -u", user="root").stdout == "0\n"
        created.files.write("made-here.txt", "x")
        assert created.files.get_info("/home/user/made-here.txt").owner == "user"
    finally:
        created.kill()


def test_watch_works_inside_a_container(sandbox: Sandbox) -> None:
    # inotify through the image's own python3 (ctypes), events named relative to the root.
    sandbox.files.make_dir("~/watched")
    handle = sandbox.files.watch_dir("/home/user/watched")
    try:
        sandbox.commands.run("echo hi > ~/watched/new.txt")
        seen: set[tuple[str, str]] = set()
        for _ in range(100):
            seen |= {(event.name, event.type.value) for event in handle.get_new_events()}
            if ("new.txt", "write") in seen:
                break
            time.sleep(0.05)
        assert {("new.txt", "create"), ("new.txt", "write")} <= seen
    finally:
        handle.stop()


def test_a_pty_runs_as_the_user_with_a_controlling_terminal(sandbox: Sandbox) -> None:
    output: list[bytes] = []
    terminal = sandbox.pty.create(e2b.PtySize(rows=10, cols=50), timeout=30)
    sandbox.pty.send_stdin(terminal.pid, b"echo me=$(whoami) ctty=$(ps -o tty= -p $$); exit\n")
    terminal.wait(on_pty=output.append)
    text = b"".join(output).decode(errors="replace")
    assert "me=user" in text
    assert "ctty=pts/" in text
