"""Instances as Docker containers: the stdlib envd runs inside a container of the test image.

This is the "envd side can run inside a container" check: the emulator copies the envd
package into a container built from ``sandbox-runtime-test/base:bookworm`` (python3 and no
pip packages), starts it there, and the ``ags`` backend drives it through the e2b SDK.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from sandbox_runtime import SandboxRuntime
from sandbox_runtime_emulators.ags.server import AgsEmulator

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def docker_emulator(docker_image: str) -> Iterator[AgsEmulator]:
    with AgsEmulator(backend="docker", default_image=docker_image) as running:
        yield running


def test_envd_in_a_container_runs_commands_and_files(docker_emulator: AgsEmulator) -> None:
    options = docker_emulator.backend_options()
    with SandboxRuntime(backend="ags", workdir="/testbed", options=options) as sandbox:
        # The command runs in the container: Debian's os-release, the image's python3.
        assert "bookworm" in sandbox.exec("cat /etc/os-release").stdout
        sandbox.write_text("/testbed/t.py", "print(6 * 7)\n")
        assert sandbox.exec("python3 t.py").stdout == "42\n"
        timed = sandbox.exec("(sleep 3; touch late) & sleep 30", timeout=1)
        assert timed.timed_out
        assert (
            sandbox.exec("sleep 3.5; ls late 2>&1 || true")
            .stdout.strip()
            .endswith("No such file or directory")
        )
        sandbox.exec(
            "git init -q . && git -c user.email=a@b -c user.name=n commit -q --allow-empty -m x",
            check=True,
        )
        assert len(sandbox.base_commit()) == 40


def test_per_sandbox_image_selects_the_container_image(
    docker_emulator: AgsEmulator, docker_image: str
) -> None:
    options = docker_emulator.backend_options()
    with SandboxRuntime(backend="ags", image=docker_image, options=options) as sandbox:
        assert sandbox.exec("python3 -c 'import sys; print(sys.version_info[0])'").stdout == "3\n"
    with pytest.raises(Exception, match=r"ResourceNotFound\.Image|failed to start"):
        SandboxRuntime(backend="ags", image="no-such-image:never", options=options).start()
