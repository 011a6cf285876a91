"""Registry push: target planning, the TCR Cloud API (the unmodified SDK against the emulator),
and real pushes through the local Docker engine to a real registry with authentication."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import SecretStr
from tencentcloud.common import credential
from tencentcloud.common.exception.tencent_cloud_sdk_exception import TencentCloudSDKException
from tencentcloud.common.profile.client_profile import ClientProfile
from tencentcloud.common.profile.http_profile import HttpProfile
from tencentcloud.tcr.v20190924 import models, tcr_client

from sandbox_runtime.backends.ags.manage.registry import (
    RegistryPusher,
    RegistryTarget,
    plan_push,
    push_all,
)
from sandbox_runtime.backends.ags.manage.settings import AgsConnection
from sandbox_runtime.backends.ags.manage.sync import ToolSync, ToolTemplate
from sandbox_runtime.backends.ags.manage.tcr import TcrCloudClient
from sandbox_runtime.errors import ConfigError
from sandbox_runtime_emulators.ags.server import AgsEmulator
from tests.ags.conftest import LocalRegistry, isolation
from tests.ags.test_tools import ROLE, client_for

# -- planning -----------------------------------------------------------------------------------


def test_targets_keep_the_image_path_or_use_the_namespace() -> None:
    tcr = RegistryTarget("tcr", "r.tencentcloudcr.com", registry_id="tcr-1")
    items = plan_push(
        [
            "slimshetty/swebench-lite:sweb.eval.x86_64.a-1",
            "python:3.11",
            "ghcr.io/org/team/tool@sha256:" + "ab" * 32,
            "namanjain12/aiohttp_final",
        ],
        tcr,
    )
    assert [i.target for i in items] == [
        "r.tencentcloudcr.com/slimshetty/swebench-lite:sweb.eval.x86_64.a-1",
        "r.tencentcloudcr.com/library/python:3.11",
        "r.tencentcloudcr.com/org/team/tool:sha256-" + "ab" * 8,
        "r.tencentcloudcr.com/namanjain12/aiohttp_final:latest",
    ]
    ccr = RegistryTarget.parse("ccr", namespace="swe")
    assert ccr.domain == "ccr.ccs.tencentyun.com"
    assert ccr.image_registry_type == "personal"
    (item,) = plan_push(["ghcr.io/org/team/tool:1"], ccr)
    assert (item.namespace, item.repository, item.target) == (
        "swe",
        "tool",
        "ccr.ccs.tencentyun.com/swe/tool:1",
    )


def test_plans_that_cannot_work_are_refused() -> None:
    target = RegistryTarget.parse("127.0.0.1:5000", namespace="swe")
    with pytest.raises(ConfigError, match="would both be pushed as"):
        plan_push(["a/x:1", "b/x:1"], target)
    with pytest.raises(ConfigError, match="not a valid TCR namespace"):
        plan_push(["x/img:1"], RegistryTarget.parse("127.0.0.1:5000"))
    for bad in ("", "https://r.io", "r.io/path", "tcr:"):
        with pytest.raises(ConfigError):
            RegistryTarget.parse(bad)
    with pytest.raises(ConfigError, match="invalid namespace"):
        RegistryTarget.parse("ccr", namespace="Upper")


# -- the TCR Cloud API ------------------------------------------------------------------------


def _sdk(emulator: AgsEmulator) -> Any:
    endpoint = emulator.url.removeprefix("http://")
    profile = ClientProfile(httpProfile=HttpProfile(protocol="http", endpoint=endpoint))
    cred = credential.Credential(emulator.secret_id, emulator.secret_key)
    return tcr_client.TcrClient(cred, "ap-guangzhou", profile)


def _request(model: type, **fields: object) -> Any:
    request = model()
    request.from_json_string(json.dumps(fields))
    return request


def test_unmodified_tcr_sdk_against_the_emulator(emulator: AgsEmulator) -> None:
    sdk = _sdk(emulator)
    registry_id = emulator.tcr.registry.registry_id
    found = sdk.DescribeInstances(_request(models.DescribeInstancesRequest))
    assert [r.RegistryId for r in found.Registries] == [registry_id]
    assert found.Registries[0].Status == "Running"
    sdk.CreateNamespace(
        _request(
            models.CreateNamespaceRequest,
            RegistryId=registry_id,
            NamespaceName="sdk-ns",
            IsPublic=False,
        )
    )
    with pytest.raises(TencentCloudSDKException) as exists:
        sdk.CreateNamespace(
            _request(models.CreateNamespaceRequest, RegistryId=registry_id, NamespaceName="sdk-ns")
        )
    assert exists.value.get_code() == "InvalidParameter.ErrNamespaceExist"
    with pytest.raises(TencentCloudSDKException) as illegal:
        sdk.CreateNamespace(
            _request(models.CreateNamespaceRequest, RegistryId=registry_id, NamespaceName="-Bad")
        )
    assert illegal.value.get_code() == "InvalidParameter.ErrorNameIllegal"
    listed = sdk.DescribeNamespaces(
        _request(models.DescribeNamespacesRequest, RegistryId=registry_id, NamespaceName="sdk-ns")
    )
    assert [n.Name for n in listed.NamespaceList] == ["sdk-ns"]
    sdk.CreateRepository(
        _request(
            models.CreateRepositoryRequest,
            RegistryId=registry_id,
            NamespaceName="sdk-ns",
            RepositoryName="app",
        )
    )
    repos = sdk.DescribeRepositories(
        _request(models.DescribeRepositoriesRequest, RegistryId=registry_id, NamespaceName="sdk-ns")
    )
    assert [r.Name for r in repos.RepositoryList] == ["sdk-ns/app"]
    with pytest.raises(TencentCloudSDKException) as no_namespace:
        sdk.CreateRepository(
            _request(
                models.CreateRepositoryRequest,
                RegistryId=registry_id,
                NamespaceName="nope",
                RepositoryName="app",
            )
        )
    assert no_namespace.value.get_code() == "ResourceNotFound.ErrNoNamespace"
    token = sdk.CreateInstanceToken(
        _request(models.CreateInstanceTokenRequest, RegistryId=registry_id, TokenType="temp")
    )
    assert token.Username
    assert token.Token
    sdk.CreateNamespacePersonal(_request(models.CreateNamespacePersonalRequest, Namespace="mine"))
    sdk.CreateRepositoryPersonal(
        _request(models.CreateRepositoryPersonalRequest, RepoName="mine/app", Public=0)
    )
    personal = sdk.DescribeRepositoryOwnerPersonal(
        _request(models.DescribeRepositoryOwnerPersonalRequest, RepoName="mine/app")
    )
    assert [r.RepoName for r in personal.Data.RepoInfo] == ["mine/app"]


def _tcr(emulator: AgsEmulator) -> TcrCloudClient:
    return AgsConnection.from_env(
        endpoint=emulator.url, secret_id=emulator.secret_id, secret_key=emulator.secret_key
    ).tcr_client()


def test_namespaces_and_repositories_are_ensured_idempotently(emulator: AgsEmulator) -> None:
    tcr = _tcr(emulator)
    registry_id = emulator.tcr.registry.registry_id
    assert tcr.ensure_namespace(registry_id, "ensured") is True
    assert tcr.ensure_namespace(registry_id, "ensured") is False
    assert tcr.ensure_repository(registry_id, "ensured", "app") is True
    assert tcr.ensure_repository(registry_id, "ensured", "app") is False
    # A lost answer: the namespace was made, the retried create says it exists, which is
    # success (it cannot tell that the first attempt made it, so it says it did not).
    emulator.faults.inject("drop_answer", plane="cloud", operation="CreateNamespace")
    assert tcr.ensure_namespace(registry_id, "retried") is False
    assert "retried" in emulator.tcr.registry.namespaces
    assert [r.fault for r in emulator.faults.requests("cloud", "CreateNamespace")][-2:] == [
        "drop_answer",
        None,
    ]
    assert tcr.ensure_namespace_personal("personal-ns") is True
    assert tcr.ensure_repository_personal("personal-ns/app") is True
    assert tcr.ensure_repository_personal("personal-ns/app") is False
    assert tcr.describe_instance(registry_id).status == "Running"


def test_dry_run_plan_only_reads(emulator: AgsEmulator) -> None:
    target = RegistryTarget.parse(f"tcr:{emulator.tcr.registry.registry_id}", namespace="plan")
    pusher = RegistryPusher(target, tcr=_tcr(emulator), docker_client=object())
    emulator.faults.clear()
    items = pusher.plan(["org/app:1"])
    assert items[0].target == f"{emulator.tcr.registry.domain}/plan/app:1"
    assert {r.operation for r in emulator.faults.requests("cloud")} == {"DescribeInstances"}
    assert "plan" not in emulator.tcr.registry.namespaces


# -- real pushes ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def registry_emulator(local_registry: LocalRegistry) -> Iterator[AgsEmulator]:
    with AgsEmulator(
        backend="local",
        local_isolation=isolation(),
        tcr_domain=local_registry.domain,
        tcr_login=(local_registry.username, local_registry.password),
    ) as running:
        yield running


def _catalog(registry: LocalRegistry, repository: str) -> list[str]:
    auth = (registry.username, registry.password)
    answer = httpx.get(f"http://{registry.domain}/v2/{repository}/tags/list", auth=auth)
    return list(answer.json().get("tags") or []) if answer.status_code == 200 else []


@pytest.mark.docker
def test_push_to_tcr_creates_namespace_logs_in_and_pushes(
    registry_emulator: AgsEmulator, local_registry: LocalRegistry, tiny_images: tuple[str, ...]
) -> None:
    emulator = registry_emulator
    target = RegistryTarget.parse(f"tcr:{emulator.tcr.registry.registry_id}", namespace="swe")
    pusher = RegistryPusher(target, tcr=_tcr(emulator))
    items = pusher.plan(tiny_images)
    results = push_all(pusher, items)
    assert [r.status for r in results] == ["pushed", "pushed"]
    assert all(r.digest.startswith("sha256:") for r in results)
    assert "swe" in emulator.tcr.registry.namespaces
    assert ("swe", "tiny-a") in emulator.tcr.registry.repositories
    assert emulator.tcr.tokens == [local_registry.password]  # logged in with TCR's token
    assert _catalog(local_registry, "swe/tiny-a") == ["1"]
    assert _catalog(local_registry, "swe/tiny-b") == ["2"]
    # Pushing again finds both in the registry with the same digests and skips them.
    again = push_all(RegistryPusher(target, tcr=_tcr(emulator)), items)
    assert [r.status for r in again] == ["present", "present"]
    assert [r.digest for r in again] == [r.digest for r in results]


@pytest.mark.docker
def test_push_to_a_custom_registry_and_a_refused_login(
    local_registry: LocalRegistry, tiny_images: tuple[str, ...]
) -> None:
    target = RegistryTarget.parse(local_registry.domain, namespace="plain")
    pusher = RegistryPusher(
        target, username=local_registry.username, password=SecretStr(local_registry.password)
    )
    (result,) = push_all(pusher, pusher.plan(tiny_images[:1]))
    assert result.status == "pushed"
    assert _catalog(local_registry, "plain/tiny-a") == ["1"]
    wrong = "not-the-" + local_registry.password
    refused = RegistryPusher(target, username=local_registry.username, password=SecretStr(wrong))
    with pytest.raises(Exception, match="docker login") as raised:
        push_all(refused, refused.plan(tiny_images[1:]))
    assert wrong not in str(raised.value)


@pytest.mark.docker
def test_sync_pushes_then_creates_tools_for_the_pushed_images(
    registry_emulator: AgsEmulator,
    local_registry: LocalRegistry,
    tiny_images: tuple[str, ...],
    tmp_path: Path,
) -> None:
    emulator = registry_emulator
    target = RegistryTarget.parse(f"tcr:{emulator.tcr.registry.registry_id}", namespace="synced")
    pusher = RegistryPusher(target, tcr=_tcr(emulator))
    sync = ToolSync(client_for(emulator), ToolTemplate(role_arn=ROLE), pusher=pusher)
    sync.poll_interval = 0.05
    report = sync.run(tiny_images, tmp_path / "m.json")
    assert report.ok, report.to_dict()
    mapping = json.loads((tmp_path / "m.json").read_text())
    for image in tiny_images:
        pushed = mapping[image]["tcr_image"]
        assert pushed.startswith(f"{local_registry.domain}/synced/")
        tool = emulator.store.tool(tool_id=mapping[image]["tool_id"])
        assert tool.custom["Image"] == pushed
        assert tool.custom["ImageRegistryType"] == "enterprise"
    assert _catalog(local_registry, "synced/tiny-b") == ["2"]


@pytest.mark.docker
def test_push_to_ccr_creates_the_personal_namespace_and_repository(
    registry_emulator: AgsEmulator, local_registry: LocalRegistry, tiny_images: tuple[str, ...]
) -> None:
    # CCR's domain is fixed in reality; here ccr:<domain> points at the local registry.
    target = RegistryTarget.parse(f"ccr:{local_registry.domain}", namespace="personal")
    assert target.image_registry_type == "personal"
    pusher = RegistryPusher(
        target,
        tcr=_tcr(registry_emulator),
        username=local_registry.username,
        password=SecretStr(local_registry.password),
    )
    (result,) = push_all(pusher, pusher.plan(tiny_images[1:]))
    assert result.status == "pushed"
    assert "personal" in registry_emulator.tcr.personal_namespaces
    assert "personal/tiny-b" in registry_emulator.tcr.personal_repositories
    assert _catalog(local_registry, "personal/tiny-b") == ["2"]
    without_login = RegistryPusher(target, tcr=_tcr(registry_emulator))
    with pytest.raises(ConfigError, match="CCR needs a docker login"):
        push_all(without_login, without_login.plan(tiny_images[:1]))


@pytest.mark.docker
def test_sync_reports_a_failed_push_per_image_and_creates_no_tool(
    registry_emulator: AgsEmulator, local_registry: LocalRegistry, tiny_images: tuple[str, ...]
) -> None:
    target = RegistryTarget.parse(local_registry.domain, namespace="refused")
    pusher = RegistryPusher(
        target, username=local_registry.username, password=SecretStr("not-the-password")
    )
    store = registry_emulator.store
    with store.lock:  # forget the tools an earlier test made for these images
        for tool_id, tool in list(store.tools.items()):
            if any(t["Value"] in tiny_images for t in tool.tags if t["Key"] == "image"):
                del store.tools[tool_id]
    before = set(store.tools)
    sync = ToolSync(client_for(registry_emulator), ToolTemplate(role_arn=ROLE), pusher=pusher)
    report = sync.run(tiny_images)
    assert not report.ok
    assert {e.status for e in report.entries} == {"ERROR"}
    assert all("docker login" in e.reason for e in report.entries)
    assert "not-the-password" not in json.dumps(report.to_dict())
    assert set(store.tools) == before
