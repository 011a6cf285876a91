"""Image pre-cache on AGS: the unmodified SDK against the emulator, then ``prefetch_images``."""

from __future__ import annotations

import time

import pytest
from tencentcloud.ags.v20250920 import ags_client, models
from tencentcloud.common.exception.tencent_cloud_sdk_exception import TencentCloudSDKException

from sandbox_runtime.backends.ags import AgsBackend, AgsOptions
from sandbox_runtime_emulators.ags.server import AgsEmulator
from tests.ags.tc_sdk import sdk_client as _sdk
from tests.ags.tc_sdk import sdk_request as _request


def _listed(client: ags_client.AgsClient, **fields: object) -> list[models.PreCacheImage]:
    found: list[models.PreCacheImage] = []
    token = None
    while True:
        page = client.DescribePreCacheImageList(
            _request(
                models.DescribePreCacheImageListRequest,
                **fields,
                **({"NextToken": token} if token else {}),
            )
        )
        found += page.PreCacheImageList or []
        token = page.NextToken
        if not token:
            return found


def _clear(client: ags_client.AgsClient) -> None:
    for row in _listed(client):
        client.DeletePreCacheImage(
            _request(models.DeletePreCacheImageRequest, PreCacheImageId=row.PreCacheImageId)
        )


def test_the_sdk_creates_lists_pages_and_deletes_precaches(emulator: AgsEmulator) -> None:
    client = _sdk(emulator)
    _clear(client)
    created = client.CreatePreCacheImageTask(
        _request(
            models.CreatePreCacheImageTaskRequest, Image="swe/a:1", ImageRegistryType="personal"
        )
    )
    assert created.PreCacheImageId
    assert created.Image == "swe/a:1"
    assert created.ImageRegistryType == "personal"
    assert created.ImageDigest.startswith("sha256:")
    again = client.CreatePreCacheImageTask(
        _request(
            models.CreatePreCacheImageTaskRequest, Image="swe/a:1", ImageRegistryType="personal"
        )
    )
    assert again.PreCacheImageId == created.PreCacheImageId
    for index in range(4):
        client.CreatePreCacheImageTask(
            _request(
                models.CreatePreCacheImageTaskRequest,
                Image=f"swe/b:{index}",
                ImageRegistryType="enterprise",
            )
        )
    rows = _listed(client, MaxResults=2)
    assert len(rows) == 5
    first = {row.Image: row for row in rows}["swe/a:1"]
    assert first.SourceType == "EXPLICIT"
    assert first.Status in ("Caching", "Ready")
    deadline = time.monotonic() + 10
    while first.Status != "Ready" and time.monotonic() < deadline:
        time.sleep(0.1)
        first = _listed(client, Filters=[{"Name": "Image", "Values": ["swe/a:1"]}])[0]
    assert first.Status == "Ready"
    assert first.CachedImageSizeBytes > 0
    personal = _listed(client, Filters=[{"Name": "ImageRegistryType", "Values": ["personal"]}])
    assert [row.Image for row in personal] == ["swe/a:1"]
    client.DeletePreCacheImage(
        _request(models.DeletePreCacheImageRequest, PreCacheImageId=created.PreCacheImageId)
    )
    assert "swe/a:1" not in {row.Image for row in _listed(client)}
    with pytest.raises(TencentCloudSDKException) as bad:
        client.CreatePreCacheImageTask(
            _request(models.CreatePreCacheImageTaskRequest, Image="x:1", ImageRegistryType="ftp")
        )
    assert bad.value.get_code() == "InvalidParameterValue.ImageRegistryType"
    with pytest.raises(TencentCloudSDKException) as gone:
        client.DeletePreCacheImage(
            _request(models.DeletePreCacheImageRequest, PreCacheImageId=created.PreCacheImageId)
        )
    assert gone.value.get_code() == "ResourceNotFound"
    _clear(client)


def test_prefetch_images_asks_once_per_image_and_keeps_the_budget(emulator: AgsEmulator) -> None:
    client = _sdk(emulator)
    _clear(client)
    options = AgsOptions(
        endpoint=emulator.url,
        secret_id=emulator.secret_id,
        secret_key=emulator.secret_key,
        image_registry_type="personal",
        precache_budget=1_200_000_000,
    )
    first = [f"swe/task:{index}" for index in range(4)]
    AgsBackend.prefetch_images([*first, first[0]], options)
    AgsBackend.prefetch_images(first, options)  # cached or caching: nothing new
    rows = _listed(client)
    assert sorted(row.Image for row in rows) == sorted(first)
    time.sleep(1.2)  # the emulator's cache becomes Ready (sizes count from then)
    later = [f"swe/task:{index}" for index in range(4, 8)]
    AgsBackend.prefetch_images(later, options)
    time.sleep(1.2)
    AgsBackend.prefetch_images(later, options)  # the budget drops the first ones, never these
    rows = _listed(client)
    images = {row.Image for row in rows}
    assert set(later) <= images
    assert sum(row.CachedImageSizeBytes for row in rows) <= 1_200_000_000
    assert len(images & set(first)) < len(first)
    _clear(client)
