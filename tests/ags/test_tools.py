"""Tool management: spec validation, the CreateSandboxTool request, and the tool lifecycle
against the emulator, including a tool that turns FAILED with the service's reason."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pydantic import ValidationError

from sandbox_runtime.backends.ags._cloud import AgsApiError, AgsCloudClient
from sandbox_runtime.backends.ags.manage import instances, tools
from sandbox_runtime.backends.ags.manage.settings import AgsConnection
from sandbox_runtime.backends.ags.manage.tools import EnvdInImage, ToolSpec
from sandbox_runtime.errors import ConfigError
from sandbox_runtime_emulators.ags.server import AgsEmulator

ROLE = "qcs::cam::uin/100000000001:roleName/ags-pull"


def client_for(emulator: AgsEmulator) -> AgsCloudClient:
    return AgsConnection.from_env(
        endpoint=emulator.url, secret_id=emulator.secret_id, secret_key=emulator.secret_key
    ).ags_client()


@pytest.fixture
def client(emulator: AgsEmulator) -> AgsCloudClient:
    return client_for(emulator)


def test_spec_refuses_what_the_service_refuses() -> None:
    for bad in ("", "a" * 51, "has space", "dots.not.allowed", "ünïcode"):
        with pytest.raises(ValidationError, match="invalid tool name"):
            ToolSpec(name=bad, image="x:1")
    assert ToolSpec(name="a" * 50, image="x:1").name == "a" * 50
    with pytest.raises(ValidationError, match="tag"):
        ToolSpec(name="t", image="x:1", tags={"image": "x" * 256})
    with pytest.raises(ValidationError, match="duration"):
        ToolSpec(name="t", image="x:1", default_timeout="5 minutes")
    with pytest.raises(ConfigError, match="role ARN"):
        ToolSpec(name="t", image="x:1").to_request()
    with pytest.raises(ConfigError, match="VPC"):
        ToolSpec(name="t", image="x:1", role_arn=ROLE, network_mode="VPC").to_request()


def test_request_mounts_envd_or_starts_it_from_the_image() -> None:
    mounted = ToolSpec(name="t", image="r/i:1", role_arn=ROLE, tags={"image": "r/i:1"})
    request = mounted.to_request("token-1")
    custom = request["CustomConfiguration"]
    assert request["ToolType"] == "custom"
    assert request["ClientToken"] == "token-1"
    assert request["Tags"] == [{"Key": "image", "Value": "r/i:1"}]
    assert (custom["Command"], custom["Args"]) == (["/mnt/envd"], ["-port", "49983"])
    assert custom["Probe"]["HttpGet"] == {"Path": "/health", "Port": 49983, "Scheme": "HTTP"}
    assert custom["Probe"]["ProbePeriodMs"] == 2000
    assert custom["Probe"]["FailureThreshold"] == 30
    assert custom["Ports"] == [{"Name": "envd", "Port": 49983, "Protocol": "TCP"}]
    mount = request["StorageMounts"][0]
    assert mount["MountPath"] == "/mnt/envd"
    assert mount["ReadOnly"] is True
    assert mount["StorageSource"]["Image"]["SubPath"] == "/usr/bin/envd"

    built_in = ToolSpec(
        name="t", image="r/i:1", image_registry_type="custom", envd=EnvdInImage()
    ).to_request()
    assert "StorageMounts" not in built_in
    assert built_in["CustomConfiguration"]["Command"] == ["/usr/bin/envd"]
    assert "RoleArn" not in built_in  # a custom registry and no mount need no role


def test_create_wait_list_get_delete(emulator: AgsEmulator, client: AgsCloudClient) -> None:
    spec = ToolSpec(
        name="lifecycle-tool", image="repo/app:1", role_arn=ROLE, tags={"team": "rl"}, cpu="1000m"
    )
    created = tools.create_tool(client, spec, wait=True, poll_interval=0.05)
    assert created.status == "ACTIVE"
    assert created.tags == {"team": "rl"}
    stored = emulator.store.tool(tool_id=created.tool_id)
    assert stored.client_token  # every create carries an idempotency token
    assert stored.storage_mounts[0]["MountPath"] == "/mnt/envd"
    assert tools.get_tool(client, "lifecycle-tool").tool_id == created.tool_id
    assert tools.get_tool(client, created.tool_id).name == "lifecycle-tool"
    assert [t.name for t in tools.list_tools(client, tags={"team": "rl"})] == ["lifecycle-tool"]
    assert tools.list_tools(client, tags={"team": "other"}) == []
    with pytest.raises(AgsApiError) as taken:
        tools.create_tool(client, spec)
    assert taken.value.code == "ResourceInUse.SandboxTool"

    # A tool with a running instance cannot go; once it is stopped, it can.
    running = instances.start_instance(client, tool_name="lifecycle-tool", wait=60)
    with pytest.raises(AgsApiError, match=r"ResourceInUse\.SandboxTool"):
        tools.delete_tool(client, "lifecycle-tool")
    assert instances.stop_instance(client, running.instance_id)
    assert not instances.stop_instance(client, running.instance_id)
    assert tools.delete_tool(client, "lifecycle-tool").tool_id == created.tool_id
    with pytest.raises(tools.ToolNotFoundError):
        tools.get_tool(client, "lifecycle-tool")


def test_listing_pages_through_every_tool(emulator: AgsEmulator, client: AgsCloudClient) -> None:
    for index in range(7):
        spec = ToolSpec(name=f"paged-{index}", image="p/i:1", role_arn=ROLE, tags={"set": "paged"})
        tools.create_tool(client, spec)
    emulator.faults.clear()
    listed = list(client.pages("DescribeSandboxToolList", {}, "SandboxToolSet", page_size=3))
    assert {t["ToolName"] for t in listed} >= {f"paged-{i}" for i in range(7)}
    assert len(emulator.faults.requests("cloud", "DescribeSandboxToolList")) == -(-len(listed) // 3)
    assert len(tools.list_tools(client, tags={"set": "paged"})) == 7


def test_service_refuses_bad_storage_mounts(client: AgsCloudClient) -> None:
    request = ToolSpec(name="bad-mount", image="r/i:1", role_arn=ROLE).to_request()
    request["StorageMounts"][0]["MountPath"] = "relative/path"
    with pytest.raises(AgsApiError) as refused:
        client.create_tool(request)
    assert refused.value.code == "InvalidParameterValue.StorageMount"
    request = ToolSpec(name="bad-mount", image="r/i:1", role_arn=ROLE).to_request()
    del request["RoleArn"]
    with pytest.raises(AgsApiError) as no_role:
        client.create_tool(request)
    assert no_role.value.code == "MissingParameter.RoleArn"


@pytest.fixture(scope="module")
def docker_emulator(docker_image: str) -> Iterator[AgsEmulator]:
    with AgsEmulator(backend="docker", default_image=docker_image) as running:
        yield running


@pytest.mark.docker
def test_tool_whose_image_cannot_run_fails_with_its_reason(
    docker_emulator: AgsEmulator, docker_image: str
) -> None:
    client = client_for(docker_emulator)
    missing = ToolSpec(name="no-such-image", image="srt-missing/none:1", role_arn=ROLE)
    with pytest.raises(tools.ToolFailedError) as failed:
        tools.create_tool(client, missing, wait=True, poll_interval=0.05)
    assert failed.value.tool.status == "FAILED"
    assert "srt-missing/none:1" in failed.value.reason
    assert "not found" in failed.value.reason
    present = ToolSpec(name="present-image", image=docker_image, role_arn=ROLE)
    assert tools.create_tool(client, present, wait=True, poll_interval=0.05).status == "ACTIVE"
