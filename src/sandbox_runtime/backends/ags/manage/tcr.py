"""The TCR (Tencent Container Registry) Cloud API calls an image push needs.

AGS pulls custom images from TCR Enterprise instances (``*.tencentcloudcr.com``) or from CCR
Personal (``ccr.ccs.tencentyun.com``).  Before ``docker push`` can succeed there, the
namespace (and, for Enterprise, the repository) must exist and docker must be logged in; the
seed tool skipped the first part, so every new namespace failed its first push.  This module
makes those calls idempotent: each ``ensure_*`` looks first, creates what is missing, and
treats "already exists" from a concurrent creator as success.

Transport, retries and error translation are those of
:class:`~sandbox_runtime.backends.ags._cloud.CloudApiClient` (errors are
:class:`~sandbox_runtime.backends.ags._cloud.AgsApiError` whose message starts with
``TCR``); the service definition is ``tencentcloud-sdk-python-tcr``'s client (``2019-09-24``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import SecretStr

from sandbox_runtime.backends.ags._cloud import PAGE_LIMIT, AgsApiError, CloudApiClient

try:
    from tencentcloud.tcr.v20190924.tcr_client import TcrClient
except ImportError as exc:  # pragma: no cover - exercised through the CLI's message
    raise ImportError(
        "pushing to TCR needs tencentcloud-sdk-python-tcr: pip install 'sandbox-runtime-swe[ags]'"
    ) from exc

__all__ = ["INTERNAL_ENDPOINT", "RegistryInstance", "RegistryToken", "TcrCloudClient"]

INTERNAL_ENDPOINT = "tcr.internal.tencentcloudapi.com"
_EXISTS = ("InvalidParameter.ErrNamespaceExist", "InvalidParameter.ErrRepoExist")
_CONFLICT = ("FailedOperation.ErrorTcrResourceConflict", "InternalError.ErrConflict")


@dataclass(frozen=True)
class RegistryInstance:
    """The parts of a TCR Enterprise instance (``Registry``) a push needs."""

    registry_id: str
    name: str
    status: str
    public_domain: str
    internal_endpoint: str


@dataclass(frozen=True)
class RegistryToken:
    """A docker login for a registry; the password never prints."""

    username: str
    password: SecretStr
    expires: int | None = None


def _exists(exc: AgsApiError) -> bool:
    return exc.code in _EXISTS or exc.code in _CONFLICT


class TcrCloudClient(CloudApiClient):
    """Typed TCR Cloud API calls for one account and region."""

    sdk_client = TcrClient
    label = "TCR"

    def _create_unless_exists(self, action: str, params: dict[str, Any]) -> bool:
        """Call a create action; True if this call created the resource.

        An "already exists" answer (a concurrent creator got there first) counts as success.
        """
        try:
            self.call(action, params, idempotent=True)
        except AgsApiError as exc:
            if _exists(exc):
                return False
            raise
        return True

    # -- TCR Enterprise ----------------------------------------------------------------------

    def describe_instance(self, registry_id: str) -> RegistryInstance:
        """``DescribeInstances`` for one instance id; ``ResourceNotFound`` if there is none."""
        answer = self.call(
            "DescribeInstances", {"Registryids": [registry_id], "Limit": 1}, idempotent=True
        )
        for item in answer.get("Registries") or []:
            if item.get("RegistryId") == registry_id:
                return RegistryInstance(
                    registry_id=registry_id,
                    name=str(item.get("RegistryName", "")),
                    status=str(item.get("Status", "")),
                    public_domain=str(item.get("PublicDomain", "")),
                    internal_endpoint=str(item.get("InternalEndpoint", "") or ""),
                )
        raise AgsApiError(
            "ResourceNotFound", f"TCR instance {registry_id} not found", service=self.label
        )

    def ensure_namespace(self, registry_id: str, namespace: str) -> bool:
        """Create the namespace unless it exists (private); True if this call created it."""
        answer = self.call(
            "DescribeNamespaces",
            {"RegistryId": registry_id, "NamespaceName": namespace, "Limit": PAGE_LIMIT},
            idempotent=True,
        )
        if any(n.get("Name") == namespace for n in answer.get("NamespaceList") or []):
            return False
        return self._create_unless_exists(
            "CreateNamespace",
            {"RegistryId": registry_id, "NamespaceName": namespace, "IsPublic": False},
        )

    def ensure_repository(self, registry_id: str, namespace: str, repository: str) -> bool:
        """Create the repository unless it exists; True if this call created it."""
        answer = self.call(
            "DescribeRepositories",
            {
                "RegistryId": registry_id,
                "NamespaceName": namespace,
                "RepositoryName": repository,
                "Limit": PAGE_LIMIT,
            },
            idempotent=True,
        )
        names = {str(r.get("Name", "")) for r in answer.get("RepositoryList") or []}
        if repository in names or f"{namespace}/{repository}" in names:
            return False
        return self._create_unless_exists(
            "CreateRepository",
            {
                "RegistryId": registry_id,
                "NamespaceName": namespace,
                "RepositoryName": repository,
                "BriefDescription": "pushed by sandbox-runtime",
            },
        )

    def create_token(self, registry_id: str) -> RegistryToken:
        """``CreateInstanceToken``: a temporary (1 h) docker login for the instance.

        Not retried on a lost answer (a second token is harmless but the call is not
        idempotent), only on rate limits.
        """
        answer = self.call(
            "CreateInstanceToken",
            {"RegistryId": registry_id, "TokenType": "temp", "Desc": "sandbox-runtime push"},
            idempotent=False,
        )
        expires: Any = answer.get("ExpTime")
        return RegistryToken(
            username=str(answer.get("Username", "")),
            password=SecretStr(str(answer.get("Token", ""))),
            expires=int(expires) if expires is not None else None,
        )

    # -- CCR Personal ------------------------------------------------------------------------

    def ensure_namespace_personal(self, namespace: str) -> bool:
        """Create a CCR Personal namespace unless it exists; True if this call created it."""
        answer = self.call(
            "DescribeNamespacePersonal",
            {"Namespace": namespace, "Limit": PAGE_LIMIT, "Offset": 0},
            idempotent=True,
        )
        infos = (answer.get("Data") or {}).get("NamespaceInfo") or []
        if any(n.get("Namespace") == namespace for n in infos):
            return False
        return self._create_unless_exists("CreateNamespacePersonal", {"Namespace": namespace})

    def ensure_repository_personal(self, repo_name: str) -> bool:
        """Create a CCR Personal repository (``namespace/name``) unless it exists."""
        answer = self.call(
            "DescribeRepositoryOwnerPersonal",
            {"RepoName": repo_name, "Limit": PAGE_LIMIT, "Offset": 0},
            idempotent=True,
        )
        infos = (answer.get("Data") or {}).get("RepoInfo") or []
        if any(r.get("RepoName") == repo_name for r in infos):
            return False
        return self._create_unless_exists(
            "CreateRepositoryPersonal",
            {"RepoName": repo_name, "Public": 0, "Description": "pushed by sandbox-runtime"},
        )
