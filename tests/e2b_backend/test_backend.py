"""The e2b backend against the AGS emulator's e2b door: templates, metadata, keys."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import SecretStr

from sandbox_runtime import SandboxConfig, SandboxRuntime, list_sandboxes
from sandbox_runtime.backends.e2b import E2bBackend
from sandbox_runtime.errors import BackendUnavailableError, ConfigError, SandboxError
from tests.conftest import bwrap_problem, require

try:
    from sandbox_runtime_emulators.ags.server import AgsEmulator
except ImportError:  # pragma: no cover
    require("needs the emulators: pip install -e ./emulators")


@pytest.fixture(scope="module")
def emulator() -> Iterator[AgsEmulator]:
    require(bwrap_problem())
    with AgsEmulator(backend="local", local_isolation="namespace") as running:
        yield running


def _config(emulator: AgsEmulator, tmp_path: Path, **options: object) -> SandboxConfig:
    given: dict[str, object] = {
        "api_key": SecretStr(emulator.api_key),
        "api_url": emulator.url,
        "sandbox_url": emulator.url,
        "template": emulator.default_tool.name,
        "checkpoint_dir": tmp_path / "records",
        **options,
    }
    image = given.pop("image", None)
    return SandboxConfig(
        backend="e2b", workdir="/testbed", lifetime=300, image=image, options=given
    )


def test_an_image_starts_from_its_mapped_template(emulator: AgsEmulator, tmp_path: Path) -> None:
    emulator.service.add_ready_tool("tpl-for-row", None)
    mapping = tmp_path / "templates.json"
    mapping.write_text(json.dumps({"example.org/swe/row-1:latest": "tpl-for-row"}))
    config = _config(
        emulator,
        tmp_path,
        template="no-such-template",
        template_mapping=mapping,
        image="example.org/swe/row-1:latest",
    )
    with SandboxRuntime(config) as sandbox:
        instance = emulator.service.store.instance(sandbox.id)
        assert instance.tool.name == "tpl-for-row"
    missing = _config(emulator, tmp_path, template_mapping=mapping, image="example.org/other:1")
    with pytest.raises(ConfigError, match=r"templates\.json: image 'example\.org/other:1'"):
        SandboxRuntime(missing).start()


def test_labels_are_metadata_and_list_and_attach_use_them(
    emulator: AgsEmulator, tmp_path: Path
) -> None:
    config = _config(emulator, tmp_path).model_copy(update={"labels": {"task": "t-42"}})
    with SandboxRuntime(config) as sandbox:
        assert emulator.service.store.instance(sandbox.id).metadata["task"] == "t-42"
        listed = list_sandboxes("e2b", labels={"task": "t-42"}, options=config.options)
        assert [info.sandbox_id for info in listed] == [sandbox.id]
        again = SandboxRuntime.connect("e2b", sandbox.id, options=config.options)
        assert again.workdir == "/testbed"  # from the sandbox's own metadata
        assert again.exec("echo hi").stdout == "hi\n"
        again.close()  # kills it: the first handle's close then finds it gone, harmlessly


def test_a_refused_key_is_said_and_never_shown(emulator: AgsEmulator, tmp_path: Path) -> None:
    secret = "e2b_" + "5" * 40
    config = _config(emulator, tmp_path, api_key=SecretStr(secret))
    with pytest.raises(SandboxError) as refused:
        SandboxRuntime(config).start()
    assert isinstance(refused.value, BackendUnavailableError)
    assert "API key was refused" in str(refused.value)
    for text in (str(refused.value), repr(refused.value), repr(config)):
        assert secret not in text


_PAUSING_OWNER = textwrap.dedent(
    """
    import json, sys, time
    from sandbox_runtime import SandboxRuntime
    options = json.loads(sys.argv[1])
    sandbox = SandboxRuntime(backend="e2b", workdir="/testbed", lifetime=600, options=options)
    sandbox.start()
    sandbox.pause()
    print(sandbox.id, flush=True)
    time.sleep(600)
    """
)


def test_a_paused_sandbox_of_a_killed_owner_is_listed_and_reaped(
    emulator: AgsEmulator, tmp_path: Path
) -> None:
    """Listing and reap asked only for ``state=running``: a paused sandbox whose owner died
    was never reaped, and the service keeps paused sandboxes (billing) for weeks."""
    options = {
        "api_key": emulator.api_key,
        "api_url": emulator.url,
        "sandbox_url": emulator.url,
        "template": emulator.default_tool.name,
        "checkpoint_dir": str(tmp_path / "records"),
    }
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    owner = subprocess.Popen(
        [sys.executable, "-c", _PAUSING_OWNER, json.dumps(options)],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert owner.stdout is not None
        sandbox_id = owner.stdout.readline().strip()
    finally:
        owner.send_signal(signal.SIGKILL)
        owner.wait(timeout=30)
    assert sandbox_id
    listed = {info.sandbox_id for info in list_sandboxes("e2b", options=options)}
    assert sandbox_id in listed
    reaped = E2bBackend.reap(E2bBackend.options_model.model_validate(options))
    assert [item.reason for item in reaped if item.sandbox_id == sandbox_id] == [
        f"owner process {owner.pid} is gone"
    ]
    assert sandbox_id not in {info.sandbox_id for info in list_sandboxes("e2b", options=options)}
