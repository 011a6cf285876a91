"""The unmodified ``tencentcloud-sdk-python-ags`` client against the emulator's Cloud API."""

from __future__ import annotations

import json
import time

import httpx
import pytest
from tencentcloud.ags.v20250920 import ags_client, models
from tencentcloud.common import credential
from tencentcloud.common.exception.tencent_cloud_sdk_exception import TencentCloudSDKException
from tencentcloud.common.profile.client_profile import ClientProfile
from tencentcloud.common.profile.http_profile import HttpProfile

from sandbox_runtime_emulators.ags.server import AgsEmulator


def _client(emulator: AgsEmulator, secret_key: str | None = None) -> ags_client.AgsClient:
    endpoint = emulator.url.removeprefix("http://")
    profile = ClientProfile(httpProfile=HttpProfile(protocol="http", endpoint=endpoint))
    cred = credential.Credential(emulator.secret_id, secret_key or emulator.secret_key)
    return ags_client.AgsClient(cred, "ap-guangzhou", profile)


def _request(model: type, **fields: object) -> object:
    request = model()
    request.from_json_string(json.dumps(fields))
    return request


def test_tool_lifecycle_creating_then_active(emulator: AgsEmulator) -> None:
    client = _client(emulator)
    created = client.CreateSandboxTool(
        _request(
            models.CreateSandboxToolRequest,
            ToolName="swe-tool",
            ToolType="custom",
            RoleArn="qcs::cam::uin/1:roleName/ags",
            CustomConfiguration={"Image": "repo/img:1", "ImageRegistryType": "enterprise"},
            Tags=[{"Key": "image", "Value": "repo/img:1"}],
        )
    )
    assert created.ToolId.startswith("sdt-")
    describe = _request(models.DescribeSandboxToolListRequest, ToolIds=[created.ToolId])
    statuses = [client.DescribeSandboxToolList(describe).SandboxToolSet[0].Status]
    deadline = time.monotonic() + 10
    while statuses[-1] != "ACTIVE" and time.monotonic() < deadline:
        time.sleep(0.05)
        statuses.append(client.DescribeSandboxToolList(describe).SandboxToolSet[0].Status)
    assert statuses[0] == "CREATING"
    assert statuses[-1] == "ACTIVE"
    by_tag = client.DescribeSandboxToolList(
        _request(
            models.DescribeSandboxToolListRequest,
            Filters=[{"Name": "tag:image", "Values": ["repo/img:1"]}],
        )
    )
    assert [t.ToolName for t in by_tag.SandboxToolSet] == ["swe-tool"]
    with pytest.raises(TencentCloudSDKException) as duplicate:
        client.CreateSandboxTool(
            _request(
                models.CreateSandboxToolRequest,
                ToolName="swe-tool",
                ToolType="custom",
                RoleArn="r",
                CustomConfiguration={"Image": "x"},
            )
        )
    assert duplicate.value.get_code() == "ResourceInUse.SandboxTool"
    client.DeleteSandboxTool(_request(models.DeleteSandboxToolRequest, ToolId=created.ToolId))


def test_instance_lifecycle_token_and_data_plane(emulator: AgsEmulator) -> None:
    client = _client(emulator)
    started = client.StartSandboxInstance(
        _request(
            models.StartSandboxInstanceRequest,
            ToolName="default",
            Timeout="5m",
            ClientToken="token-1",
            CustomConfiguration={"Image": "python:3.11"},
        )
    )
    instance = started.Instance
    assert instance.Status == "RUNNING"
    assert instance.TimeoutSeconds == 300
    assert instance.CustomConfiguration.Image == "python:3.11"
    again = client.StartSandboxInstance(
        _request(models.StartSandboxInstanceRequest, ToolName="default", ClientToken="token-1")
    )
    assert again.Instance.InstanceId == instance.InstanceId  # ClientToken: idempotent
    token = client.AcquireSandboxInstanceToken(
        _request(models.AcquireSandboxInstanceTokenRequest, InstanceId=instance.InstanceId)
    )
    headers = {"E2b-Sandbox-Id": instance.InstanceId, "X-Access-Token": token.Token}
    assert httpx.get(f"{emulator.url}/health", headers=headers).status_code == 204
    wrong = {**headers, "X-Access-Token": "not-a-token"}
    assert httpx.get(f"{emulator.url}/health", headers=wrong).status_code == 401
    listed = client.DescribeSandboxInstanceList(
        _request(models.DescribeSandboxInstanceListRequest, InstanceIds=[instance.InstanceId])
    )
    assert [i.Status for i in listed.InstanceSet] == ["RUNNING"]
    client.StopSandboxInstance(
        _request(models.StopSandboxInstanceRequest, InstanceId=instance.InstanceId)
    )
    listed = client.DescribeSandboxInstanceList(
        _request(models.DescribeSandboxInstanceListRequest, InstanceIds=[instance.InstanceId])
    )
    assert listed.InstanceSet[0].Status == "STOPPED"
    assert listed.InstanceSet[0].StopReason == "manual"
    assert httpx.get(f"{emulator.url}/health", headers=headers).status_code == 502


def test_instances_expire(emulator: AgsEmulator) -> None:
    client = _client(emulator)
    started = client.StartSandboxInstance(
        _request(models.StartSandboxInstanceRequest, ToolName="default", Timeout="30s")
    )
    instance = emulator.store.instance(started.Instance.InstanceId)
    instance.expires = time.time()  # fast-forward the 30 s lifetime
    deadline = time.monotonic() + 10
    while instance.status != "STOPPED" and time.monotonic() < deadline:
        time.sleep(0.05)
    assert instance.status == "STOPPED"
    assert instance.stop_reason == "timeout"


@pytest.mark.parametrize(
    ("action", "fields", "code"),
    [
        ("StartSandboxInstance", {"ToolName": "nope"}, "ResourceNotFound.SandboxTool"),
        (
            "StartSandboxInstance",
            {"ToolName": "default", "Timeout": "2d"},
            "InvalidParameterValue.Timeout",
        ),
        (
            "StartSandboxInstance",
            {"ToolName": "default", "Timeout": "10s"},
            "InvalidParameterValue.Timeout",
        ),
        ("StopSandboxInstance", {"InstanceId": "sbi-missing"}, "ResourceNotFound.SandboxInstance"),
        (
            "CreateSandboxTool",
            {"ToolName": "bad name!", "ToolType": "custom"},
            "InvalidParameterValue.SandboxTool",
        ),
        (
            "CreateSandboxTool",
            {"ToolName": "t1", "ToolType": "custom", "CustomConfiguration": {"Image": "a/b"}},
            "MissingParameter.RoleArn",
        ),
    ],
)
def test_error_codes(
    emulator: AgsEmulator, action: str, fields: dict[str, object], code: str
) -> None:
    client = _client(emulator)
    with pytest.raises(TencentCloudSDKException) as raised:
        client.call_json(action, fields)
    assert raised.value.get_code() == code
    assert raised.value.get_request_id()


def test_signature_is_checked(emulator: AgsEmulator) -> None:
    client = _client(emulator, secret_key="wrong-key")
    with pytest.raises(TencentCloudSDKException) as raised:
        client.DescribeSandboxToolList(models.DescribeSandboxToolListRequest())
    assert raised.value.get_code() == "AuthFailure.SignatureFailure"


def test_api_keys_work_on_the_e2b_api(emulator: AgsEmulator) -> None:
    client = _client(emulator)
    created = client.CreateAPIKey(_request(models.CreateAPIKeyRequest, Name="ci"))
    assert created.APIKey.startswith("ark_")
    listed = client.DescribeAPIKeyList(models.DescribeAPIKeyListRequest())
    masked = {k.KeyId: k.MaskedKey for k in listed.APIKeySet}
    assert created.APIKey not in masked.values()
    answer = httpx.get(f"{emulator.url}/v2/sandboxes", headers={"X-API-KEY": created.APIKey})
    assert answer.status_code == 200
    client.DeleteAPIKey(_request(models.DeleteAPIKeyRequest, KeyId=created.KeyId))
    answer = httpx.get(f"{emulator.url}/v2/sandboxes", headers={"X-API-KEY": created.APIKey})
    assert answer.status_code == 401
