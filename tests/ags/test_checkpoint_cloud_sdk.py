"""Pause, resume and snapshots through the unmodified ``tencentcloud-sdk-python-ags`` client.

The control plane is the Cloud API (the SDK's own models and client); files are written and
read through the e2b SDK on the data plane, as AGS's documentation pairs them.
"""

from __future__ import annotations

import httpx
import pytest
from e2b import Sandbox
from tencentcloud.ags.v20250920 import ags_client, models
from tencentcloud.common.exception.tencent_cloud_sdk_exception import TencentCloudSDKException

from sandbox_runtime_emulators.ags.server import AgsEmulator
from tests.ags.tc_sdk import sdk_client as _client
from tests.ags.tc_sdk import sdk_request as _request


def _data_plane(emulator: AgsEmulator, instance_id: str) -> Sandbox:
    return Sandbox.connect(
        instance_id, api_key=emulator.api_key, api_url=emulator.url, sandbox_url=emulator.url
    )


def _start(client: ags_client.AgsClient, **fields: object) -> str:
    started = client.StartSandboxInstance(
        _request(models.StartSandboxInstanceRequest, Timeout="5m", **fields)
    )
    assert started.Instance.Status == "RUNNING"
    return str(started.Instance.InstanceId)


def _status(client: ags_client.AgsClient, instance_id: str) -> str:
    listed = client.DescribeSandboxInstanceList(
        _request(models.DescribeSandboxInstanceListRequest, InstanceIds=[instance_id])
    )
    return str(listed.InstanceSet[0].Status)


def _stop(client: ags_client.AgsClient, *instance_ids: str) -> None:
    for instance_id in instance_ids:
        client.StopSandboxInstance(
            _request(models.StopSandboxInstanceRequest, InstanceId=instance_id)
        )


def test_pause_keeps_files_and_resume_runs_again(emulator: AgsEmulator) -> None:
    client = _client(emulator)
    instance_id = _start(client, ToolName="default")
    try:
        _data_plane(emulator, instance_id).files.write("/home/user/kept.txt", "before pause")
        paused = client.PauseSandboxInstance(
            _request(models.PauseSandboxInstanceRequest, InstanceId=instance_id, Memory=False)
        )
        assert paused.InstanceStatus == "PAUSED"
        assert _status(client, instance_id) == "PAUSED"
        health = httpx.get(f"{emulator.url}/health", headers={"E2b-Sandbox-Id": instance_id})
        assert health.status_code == 502  # a paused instance's envd is not reachable
        with pytest.raises(TencentCloudSDKException) as again:
            client.PauseSandboxInstance(
                _request(models.PauseSandboxInstanceRequest, InstanceId=instance_id)
            )
        assert again.value.get_code() == "UnsupportedOperation.SandboxInstance"
        with pytest.raises(TencentCloudSDKException) as token:
            client.AcquireSandboxInstanceToken(
                _request(models.AcquireSandboxInstanceTokenRequest, InstanceId=instance_id)
            )
        assert token.value.get_code() == "UnsupportedOperation.SandboxInstance"
        client.ResumeSandboxInstance(
            _request(models.ResumeSandboxInstanceRequest, InstanceId=instance_id, Timeout="10m")
        )
        assert _status(client, instance_id) == "RUNNING"
        listed = client.DescribeSandboxInstanceList(
            _request(models.DescribeSandboxInstanceListRequest, InstanceIds=[instance_id])
        )
        assert listed.InstanceSet[0].TimeoutSeconds == 600
        text = _data_plane(emulator, instance_id).files.read("/home/user/kept.txt")
        assert text == "before pause"
        with pytest.raises(TencentCloudSDKException) as running:
            client.ResumeSandboxInstance(
                _request(models.ResumeSandboxInstanceRequest, InstanceId=instance_id)
            )
        assert running.value.get_code() == "UnsupportedOperation.SandboxInstance"
    finally:
        _stop(client, instance_id)


def test_a_paused_instance_can_be_stopped(emulator: AgsEmulator) -> None:
    client = _client(emulator)
    instance_id = _start(client, ToolName="default")
    client.PauseSandboxInstance(
        _request(models.PauseSandboxInstanceRequest, InstanceId=instance_id)
    )
    _stop(client, instance_id)
    assert _status(client, instance_id) == "STOPPED"
    with pytest.raises(TencentCloudSDKException) as stopped:
        client.ResumeSandboxInstance(
            _request(models.ResumeSandboxInstanceRequest, InstanceId=instance_id)
        )
    assert stopped.value.get_code() == "UnsupportedOperation.SandboxInstance"


def test_snapshot_start_list_and_delete(emulator: AgsEmulator) -> None:
    client = _client(emulator)
    source = _start(client, ToolName="default")
    started: list[str] = [source]
    try:
        _data_plane(emulator, source).files.write("/home/user/app/state.txt", "snapshotted")
        created = client.CreateSandboxSnapshot(
            _request(
                models.CreateSandboxSnapshotRequest,
                InstanceId=source,
                SnapshotName="after-setup",
                Memory=True,
                Tags=[{"Key": "task", "Value": "t1"}],
                ClientToken="snap-token-1",
            )
        )
        snapshot = created.Snapshot
        assert snapshot.SnapshotId.startswith("snap-")
        assert (snapshot.SnapshotName, snapshot.SourceInstanceId) == ("after-setup", source)
        assert snapshot.Status == "ACTIVE"
        # The emulator keeps files only, and says so instead of claiming memory.
        assert snapshot.MemoryIncluded is False
        assert "filesystem only" in snapshot.StatusReason
        repeated = client.CreateSandboxSnapshot(
            _request(
                models.CreateSandboxSnapshotRequest, InstanceId=source, ClientToken="snap-token-1"
            )
        )
        assert repeated.Snapshot.SnapshotId == snapshot.SnapshotId  # ClientToken: idempotent

        _data_plane(emulator, source).files.write("/home/user/app/state.txt", "changed later")
        copies = [_start(client, SnapshotId=snapshot.SnapshotId) for _ in range(2)]
        started += copies
        first, second = (_data_plane(emulator, c) for c in copies)
        assert first.files.read("/home/user/app/state.txt") == "snapshotted"
        first.files.write("/home/user/app/state.txt", "written in the first copy")
        assert second.files.read("/home/user/app/state.txt") == "snapshotted"
        described = client.DescribeSandboxInstanceList(
            _request(models.DescribeSandboxInstanceListRequest, InstanceIds=[copies[0]])
        )
        assert described.InstanceSet[0].ToolName == "default"  # the snapshot's tool

        by_tag = client.DescribeSandboxSnapshotList(
            _request(
                models.DescribeSandboxSnapshotListRequest,
                Filters=[{"Name": "tag:task", "Values": ["t1"]}],
            )
        )
        assert [s.SnapshotId for s in by_tag.SnapshotSet] == [snapshot.SnapshotId]
        assert by_tag.TotalCount == 1
        by_id = client.DescribeSandboxSnapshotList(
            _request(models.DescribeSandboxSnapshotListRequest, SnapshotIds=[snapshot.SnapshotId])
        )
        assert by_id.SnapshotSet[0].SourceInstanceId == source

        client.DeleteSandboxSnapshot(
            _request(models.DeleteSandboxSnapshotRequest, SnapshotId=snapshot.SnapshotId)
        )
        with pytest.raises(TencentCloudSDKException) as gone:
            client.DeleteSandboxSnapshot(
                _request(models.DeleteSandboxSnapshotRequest, SnapshotId=snapshot.SnapshotId)
            )
        assert gone.value.get_code() == "ResourceNotFound.SandboxSnapshot"
        with pytest.raises(TencentCloudSDKException) as missing:
            client.StartSandboxInstance(
                _request(models.StartSandboxInstanceRequest, SnapshotId=snapshot.SnapshotId)
            )
        assert missing.value.get_code() == "ResourceNotFound.SandboxSnapshot"
    finally:
        _stop(client, *started)


def test_start_from_a_source_instance(emulator: AgsEmulator) -> None:
    client = _client(emulator)
    source = _start(client, ToolName="default")
    started = [source]
    try:
        _data_plane(emulator, source).files.write("/home/user/cloned.txt", "from the source")
        _data_plane(emulator, source).files.write("/tmp/outside/workdir.txt", "also kept")
        clone = _start(client, SourceInstanceId=source)
        started.append(clone)
        assert clone != source
        cloned = _data_plane(emulator, clone)
        assert cloned.files.read("/home/user/cloned.txt") == "from the source"
        assert cloned.files.read("/tmp/outside/workdir.txt") == "also kept"
        cloned.files.write("/home/user/cloned.txt", "changed in the clone")
        assert (
            _data_plane(emulator, source).files.read("/home/user/cloned.txt") == "from the source"
        )
        with pytest.raises(TencentCloudSDKException) as both:
            client.StartSandboxInstance(
                _request(
                    models.StartSandboxInstanceRequest, SourceInstanceId=source, SnapshotId="x"
                )
            )
        assert both.value.get_code() == "InvalidParameter"
        with pytest.raises(TencentCloudSDKException) as unknown:
            client.StartSandboxInstance(
                _request(models.StartSandboxInstanceRequest, SourceInstanceId="sbi-missing")
            )
        assert unknown.value.get_code() == "ResourceNotFound.SandboxInstance"
    finally:
        _stop(client, *started)
