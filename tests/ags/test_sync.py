"""Dataset image->tool sync against the emulator: names, resumability, idempotent retries,
bounded concurrency, adoption, dry runs, FAILED tools and their recreation."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sandbox_runtime.backends.ags._cloud import AgsCloudClient
from sandbox_runtime.backends.ags._mapping import ToolMapping
from sandbox_runtime.backends.ags.manage.sync import (
    IMAGE_TAG,
    ToolSync,
    ToolTemplate,
    assign_tool_names,
    tool_name_for,
)
from sandbox_runtime.backends.ags.manage.tools import ToolSpec, create_tool
from sandbox_runtime_emulators.ags.server import AgsEmulator
from tests.ags.test_tools import ROLE, client_for

TEMPLATE = ToolTemplate(role_arn=ROLE)
SWE = "slimshetty/swebench-lite:sweb.eval.x86_64.django__django-11099"


@pytest.fixture
def client(emulator: AgsEmulator) -> AgsCloudClient:
    return client_for(emulator)


@pytest.fixture
def fresh(emulator: AgsEmulator) -> Iterator[None]:
    """Every test starts from an account with only the emulator's default tool."""
    yield
    with emulator.store.lock:
        for tool_id in [t for t, tool in emulator.store.tools.items() if tool.name != "default"]:
            del emulator.store.tools[tool_id]


def _creates(emulator: AgsEmulator) -> list[str | None]:
    return [r.fault for r in emulator.faults.requests("cloud", "CreateSandboxTool")]


def test_names_are_valid_unique_and_stable() -> None:
    images = [
        SWE,
        "python:3.11",
        "a/x:1",
        "b/x:1",
        "ghcr.io/org/team/tool@sha256:" + "ab" * 32,
        "namanjain12/aiohttp_final:" + "f" * 40,
    ]
    names = assign_tool_names(images)
    assert len(set(names.values())) == len(images)
    for name in names.values():
        assert re.fullmatch(r"[A-Za-z0-9_-]{1,50}", name)
    assert names["python:3.11"] == "python-3-11"
    assert names["a/x:1"] != names["b/x:1"]  # same base name: both get their own hash
    assert names["a/x:1"].startswith("x-1-")
    assert len(tool_name_for(SWE)) == 50  # too long: shortened with a hash, to exactly 50
    assert names == assign_tool_names(list(reversed(images)))  # order does not matter
    # A name someone else's tool has is avoided.
    assert assign_tool_names(["python:3.11"], taken={"python-3-11"})["python:3.11"] != (
        "python-3-11"
    )


@pytest.mark.usefixtures("fresh")
def test_sync_creates_waits_and_writes_the_mapping(
    emulator: AgsEmulator, client: AgsCloudClient, tmp_path: Path
) -> None:
    images = [SWE, "python:3.11", "a/x:1"]
    out = tmp_path / "maps" / "mapping.json"
    report = ToolSync(client, TEMPLATE, jobs=2, poll_interval=0.05).run(images, out)
    assert report.ok
    assert [e.status for e in report.entries] == ["ACTIVE"] * 3
    written = json.loads(out.read_text())
    assert sorted(written) == sorted(images)
    for image, entry in written.items():
        assert set(entry) == {"tool_name", "tool_id", "tcr_image"}
        tool = emulator.store.tool(tool_id=entry["tool_id"])
        assert tool.name == entry["tool_name"]
        assert {t["Key"]: t["Value"] for t in tool.tags}[IMAGE_TAG] == image
        assert tool.custom["Image"] == image == entry["tcr_image"]
        assert tool.client_token
    assert ToolMapping.read(out).resolve("python:3.11") is not None
    assert [p.name for p in out.parent.iterdir()] == ["mapping.json"]  # no temporary left


@pytest.mark.usefixtures("fresh")
def test_rerun_creates_only_what_is_missing(
    emulator: AgsEmulator, client: AgsCloudClient, tmp_path: Path
) -> None:
    sync = ToolSync(client, TEMPLATE, jobs=2, poll_interval=0.05)
    sync.run(["r/one:1", "r/two:1"], tmp_path / "m.json")
    emulator.faults.clear()
    plan = sync.plan(["r/one:1", "r/two:1", "r/three:1"])
    # Existing tools were found in one listing (a page of 100), not a lookup per image.
    assert len(emulator.faults.requests("cloud", "DescribeSandboxToolList")) == 1
    report = sync.apply(plan, tmp_path / "m.json")
    assert [e.action for e in report.entries] == ["reuse", "reuse", "create"]
    assert len(_creates(emulator)) == 1
    assert len(json.loads((tmp_path / "m.json").read_text())) == 3


@pytest.mark.usefixtures("fresh")
def test_lost_create_answer_is_retried_without_a_duplicate(
    emulator: AgsEmulator, client: AgsCloudClient, tmp_path: Path
) -> None:
    # The service makes the tool, then the connection drops before the answer arrives.
    emulator.faults.inject("drop_answer", plane="cloud", operation="CreateSandboxTool")
    report = ToolSync(client, TEMPLATE, poll_interval=0.05).run(["r/lost:1"], tmp_path / "m.json")
    assert report.ok
    assert _creates(emulator) == ["drop_answer", None]  # retried once...
    named = [t for t in emulator.store.tools.values() if t.name == report.entries[0].tool_name]
    assert len(named) == 1  # ...and the ClientToken made the retry return the same tool
    assert named[0].tool_id == report.entries[0].tool_id


@pytest.mark.usefixtures("fresh")
def test_creation_is_concurrent_and_bounded(emulator: AgsEmulator, client: AgsCloudClient) -> None:
    delay = 0.6
    emulator.faults.inject(
        "delay", plane="cloud", operation="CreateSandboxTool", times=6, delay=delay
    )
    sync = ToolSync(client, TEMPLATE, jobs=3, poll_interval=0.05)
    entries = sync.plan([f"c/img-{i}:1" for i in range(6)])
    began = time.monotonic()
    report = sync.apply(entries)
    elapsed = time.monotonic() - began
    assert report.ok
    assert elapsed < 6 * delay  # not one after the other...
    assert elapsed >= 2 * delay  # ...and never more than 3 at once


@pytest.mark.usefixtures("fresh")
def test_a_name_taken_meanwhile_is_adopted_only_if_it_is_ours(
    emulator: AgsEmulator, client: AgsCloudClient
) -> None:
    ours = ToolSync(client, TEMPLATE, poll_interval=0.05)
    plan = ours.plan(["race/img:1", "race/other:1"])
    # Between our listing and our creation, another sync made the first tool (with our tag),
    # and someone else took the second name for an unrelated tool.
    ToolSync(client, TEMPLATE, poll_interval=0.05).run(["race/img:1"])
    foreign = ToolSpec(name=plan[1].tool_name, image="someone/else:1", role_arn=ROLE)
    create_tool(client, foreign)
    report = ours.apply(plan)
    first, second = report.entries
    assert first.status == "ACTIVE"
    assert sum(1 for t in emulator.store.tools.values() if t.name == first.tool_name) == 1
    assert second.status == "ERROR"
    assert "is taken by tool" in second.reason
    assert not report.ok
    assert list(report.mapping) == ["race/img:1"]


@pytest.mark.usefixtures("fresh")
def test_dry_run_changes_nothing(
    emulator: AgsEmulator, client: AgsCloudClient, tmp_path: Path
) -> None:
    ToolSync(client, TEMPLATE, poll_interval=0.05).run(["dry/exists:1"])
    emulator.faults.clear()
    before = set(emulator.store.tools)
    report = ToolSync(client, TEMPLATE, dry_run=True).run(
        ["dry/exists:1", "dry/new:1"], tmp_path / "m.json"
    )
    assert [(e.action, e.status) for e in report.entries] == [
        ("reuse", "ACTIVE"),
        ("create", "PLANNED"),
    ]
    assert report.ok
    assert set(emulator.store.tools) == before
    assert {r.operation for r in emulator.faults.requests("cloud")} == {"DescribeSandboxToolList"}
    assert not (tmp_path / "m.json").exists()


def test_a_template_every_tool_would_fail_with_stops_before_any_call(
    emulator: AgsEmulator, client: AgsCloudClient
) -> None:
    from sandbox_runtime.errors import ConfigError

    with pytest.raises(ConfigError, match="role ARN"):
        ToolSync(client, ToolTemplate()).run(["x/y:1"])
    assert emulator.faults.requests("cloud") == []


@pytest.fixture(scope="module")
def docker_emulator(docker_image: str) -> Iterator[AgsEmulator]:
    with AgsEmulator(backend="docker", default_image=docker_image) as running:
        yield running


@pytest.mark.docker
def test_failed_tools_are_reported_and_recreated_on_request(
    docker_emulator: AgsEmulator, docker_image: str, tmp_path: Path
) -> None:
    import docker

    client = client_for(docker_emulator)
    missing = "srt-sync-test/later:1"
    out = tmp_path / "m.json"
    report = ToolSync(client, TEMPLATE, poll_interval=0.05).run([docker_image, missing], out)
    by_image = {e.image: e for e in report.entries}
    assert by_image[docker_image].status == "ACTIVE"
    assert by_image[missing].status == "FAILED"
    assert "not found in the local Docker engine" in by_image[missing].reason
    assert not report.ok
    assert list(json.loads(out.read_text())) == [docker_image]  # ACTIVE tools only

    # A plain re-run reports the FAILED tool again; --retry-failed replaces it once the
    # image exists.
    again = ToolSync(client, TEMPLATE, poll_interval=0.05).run([missing])
    assert (again.entries[0].action, again.entries[0].status) == ("reuse", "FAILED")
    engine = docker.from_env()
    engine.images.get(docker_image).tag("srt-sync-test/later", "1")
    try:
        fixed = ToolSync(client, TEMPLATE, poll_interval=0.05, retry_failed=True).run([missing])
    finally:
        engine.images.remove(missing)
        engine.close()
    entry = fixed.entries[0]
    assert (entry.action, entry.status) == ("recreate", "ACTIVE")
    assert entry.tool_id != by_image[missing].tool_id
    assert entry.tool_name == by_image[missing].tool_name
    assert by_image[missing].tool_id not in docker_emulator.store.tools
