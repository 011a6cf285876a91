"""The image->tool mapping file, and the ags backend resolving each sandbox's tool from it
without any control-plane lookup."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from sandbox_runtime import ConfigError, SandboxRuntime
from sandbox_runtime.backends.ags._mapping import (
    MappedTool,
    ToolMapping,
    load_mapping,
    normalize_image,
)
from sandbox_runtime.backends.ags.manage.sync import ToolSync, ToolTemplate
from sandbox_runtime_emulators.ags.server import AgsEmulator
from tests.ags.test_tools import ROLE, client_for


def test_normalized_references() -> None:
    assert normalize_image("python:3.11") == "docker.io/library/python:3.11"
    assert normalize_image("org/img") == "docker.io/org/img:latest"
    assert normalize_image("docker.io/org/img:1") == "docker.io/org/img:1"
    assert normalize_image("index.docker.io/org/img:1") == "docker.io/org/img:1"
    assert normalize_image("127.0.0.1:5000/ns/img") == "127.0.0.1:5000/ns/img:latest"
    assert normalize_image("r.io/a/b@sha256:00") == "r.io/a/b@sha256:00"


def test_reads_the_seed_format_and_resolves_spellings(tmp_path: Path) -> None:
    path = tmp_path / "tool_mapping.json"
    # What ags_tool_sync.py wrote (extra keys are ignored).
    path.write_text(
        json.dumps(
            {
                "python:3.11": {"tool_name": "python-3_11", "tool_id": "sdt-1", "tcr_image": "x"},
                "org/app:2": {"tool_id": "sdt-2", "note": "extra"},
            }
        )
    )
    mapping = ToolMapping.read(path)
    assert mapping.resolve("python:3.11") == MappedTool(
        tool_name="python-3_11", tool_id="sdt-1", tcr_image="x"
    )
    assert mapping.resolve("docker.io/library/python:3.11") is not None
    assert mapping.resolve("docker.io/org/app:2") == MappedTool(tool_id="sdt-2")
    assert mapping.resolve("org/app:3") is None


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "is not JSON"),
        ("[]", "must be a JSON object"),
        ('{"img:1": {"tcr_image": "x"}}', "needs tool_name or tool_id"),
    ],
)
def test_bad_files_are_config_errors(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "m.json"
    path.write_text(content)
    with pytest.raises(ConfigError, match=message):
        ToolMapping.read(path)
    with pytest.raises(ConfigError, match="cannot read"):
        load_mapping(tmp_path / "missing.json")


def test_loaded_once_until_the_file_changes(tmp_path: Path) -> None:
    path = tmp_path / "m.json"
    ToolMapping({"a:1": MappedTool(tool_name="a")}).write(path)
    first = load_mapping(path)
    assert load_mapping(str(path)) is first  # the same parsed object, no re-read
    ToolMapping({"a:1": MappedTool(tool_name="b"), "c:1": MappedTool(tool_name="c")}).write(path)
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    second = load_mapping(path)
    assert second is not first
    assert second.resolve("a:1") == MappedTool(tool_name="b")


def _mapping_for(emulator: AgsEmulator, images: list[str], path: Path) -> ToolMapping:
    client = client_for(emulator)
    template = ToolTemplate(role_arn=ROLE)
    report = ToolSync(client, template, poll_interval=0.05).run(images, path)
    assert report.ok
    return report.mapping


def test_backend_starts_each_image_from_its_mapped_tool(
    emulator: AgsEmulator, tmp_path: Path
) -> None:
    path = tmp_path / "mapping.json"
    mapping = _mapping_for(emulator, ["task/one:1", "task/two:1"], path)
    options = emulator.backend_options(tool_mapping=str(path))
    del options["tool_name"]  # the mapping alone says which tool
    emulator.faults.clear()
    for image in ("task/one:1", "task/two:1", "docker.io/task/two:1"):
        with SandboxRuntime(backend="ags", image=image, workdir="/testbed", options=options) as box:
            instance = emulator.store.instance(box.id)
            entry = mapping.resolve(image)
            assert entry is not None
            assert instance.tool.tool_id == entry.tool_id
            assert "Image" not in instance.custom  # the tool carries the image
            assert box.exec("echo mapped").stdout == "mapped\n"
    # Three sandboxes, and not one tool lookup on the control plane.
    assert emulator.faults.requests("cloud", "DescribeSandboxToolList") == []
    assert len(emulator.faults.requests("cloud", "StartSandboxInstance")) == 3


def test_unmapped_images_fall_back_or_fail_clearly(emulator: AgsEmulator, tmp_path: Path) -> None:
    path = tmp_path / "mapping.json"
    _mapping_for(emulator, ["task/known:1"], path)
    with_default = emulator.backend_options(tool_mapping=str(path))  # tool_name=default too
    with SandboxRuntime(backend="ags", image="task/unknown:1", options=with_default) as box:
        instance = emulator.store.instance(box.id)
        assert instance.tool.name == "default"
        assert instance.custom["Image"] == "task/unknown:1"  # run as an override
    mapping_only = dict(with_default)
    del mapping_only["tool_name"]
    with pytest.raises(ConfigError, match=r"task/unknown:1 is not in the tool mapping"):
        SandboxRuntime(backend="ags", image="task/unknown:1", options=mapping_only).start()


@pytest.mark.e2b_sdk
def test_e2b_control_plane_serves_per_task_images_through_the_mapping(
    emulator: AgsEmulator, tmp_path: Path
) -> None:
    path = tmp_path / "mapping.json"
    mapping = _mapping_for(emulator, ["task/e2b:1"], path)
    options = emulator.backend_options(
        control_plane="e2b", api_key=emulator.api_key, tool_mapping=str(path)
    )
    del options["tool_name"]
    with SandboxRuntime(backend="ags", image="task/e2b:1", options=options) as box:
        entry = mapping.resolve("task/e2b:1")
        assert entry is not None
        assert emulator.store.instance(box.id).tool.name == entry.tool_name
