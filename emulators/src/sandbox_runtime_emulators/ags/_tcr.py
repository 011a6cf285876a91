"""The few TCR (Tencent Container Registry) Cloud API actions an image push needs.

Served at the same ``POST /`` as the AGS Cloud API and told apart by ``X-TC-Version:
2019-09-24`` (the real services differ by host name; the emulator has one).  It keeps
registry instances, namespaces, repositories and access tokens, for TCR Enterprise and for
CCR Personal.  Images themselves are not stored here: an emulated registry instance names
a real registry (``PublicDomain``), such as the Debian ``docker-registry`` on 127.0.0.1 in
the tests, and ``docker push`` goes there.  ``CreateInstanceToken`` hands out the login that
registry accepts when the emulator was given one (``login``), else a random token that only
a registry without authentication lets through.
"""

from __future__ import annotations

import re
import secrets
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ._cloudapi import verify_signature
from ._state import ServiceError, new_id, rfc3339

__all__ = ["TCR_VERSION", "TcrApi"]

TCR_VERSION = "2019-09-24"
# Namespaces: 2-30 characters of lower-case letters, digits and separators (. _ -), not at
# either end and never two in a row (the SDK's documentation of CreateNamespace).
_NAMESPACE = re.compile(r"^[a-z0-9]+(?:[._-][a-z0-9]+)*$")
# Repositories: the same, with / between path segments.
_REPOSITORY = re.compile(r"^[a-z0-9]+(?:(?:[._-]|__|/)[a-z0-9]+)*$")
_UIN = "100000000001"


def _check_namespace(name: str) -> None:
    if not (2 <= len(name) <= 30 and _NAMESPACE.match(name)):
        raise ServiceError("InvalidParameter.ErrorNameIllegal", f"invalid namespace {name!r}")


def _check_repository(name: str) -> None:
    if not (2 <= len(name) <= 200 and _REPOSITORY.match(name)):
        raise ServiceError("InvalidParameter.ErrorNameIllegal", f"invalid repository {name!r}")


@dataclass
class _Registry:
    registry_id: str
    name: str
    domain: str
    created: float = field(default_factory=time.time)
    namespaces: dict[str, float] = field(default_factory=dict)
    repositories: dict[tuple[str, str], float] = field(default_factory=dict)

    def to_api(self, region: str) -> dict[str, Any]:
        return {
            "RegistryId": self.registry_id,
            "RegistryName": self.name,
            "RegistryType": "basic",
            "Status": "Running",
            "PublicDomain": self.domain,
            "InternalEndpoint": self.domain,
            "CreatedAt": rfc3339(self.created),
            "RegionName": region,
            "RegionId": 1,
            "EnableAnonymous": False,
            "TokenValidTime": 3600,
            "TagSpecification": {"ResourceType": "instance", "Tags": []},
            "ExpiredAt": "",
            "PayMod": 0,
            "RenewFlag": 0,
            "DeletionProtection": False,
        }


class TcrApi:
    """Dispatch of the TCR actions listed in ``docs/ags-emulator.md``."""

    def __init__(
        self,
        credentials: tuple[str, str] | None,
        *,
        registry_domain: str | None = None,
        personal_domain: str = "ccr.ccs.tencentyun.com",
        login: tuple[str, str] | None = None,
    ) -> None:
        self.credentials = credentials
        self.login = login
        self.personal_domain = personal_domain
        self._lock = threading.Lock()
        self.registry = _Registry(
            registry_id=new_id("tcr"),
            name="emulated",
            domain=registry_domain or "emulated.tencentcloudcr.com",
        )
        self.personal_namespaces: dict[str, float] = {}
        self.personal_repositories: dict[str, float] = {}
        #: Tokens issued by ``CreateInstanceToken`` (tests look at them; nothing checks them).
        self.tokens: list[str] = []
        self._actions: dict[str, Callable[[dict[str, Any], str], dict[str, Any]]] = {
            "DescribeInstances": self._describe_instances,
            "CreateNamespace": self._create_namespace,
            "DescribeNamespaces": self._describe_namespaces,
            "CreateRepository": self._create_repository,
            "DescribeRepositories": self._describe_repositories,
            "CreateInstanceToken": self._create_token,
            "CreateNamespacePersonal": self._create_namespace_personal,
            "DescribeNamespacePersonal": self._describe_namespaces_personal,
            "CreateRepositoryPersonal": self._create_repository_personal,
            "DescribeRepositoryOwnerPersonal": self._describe_repositories_personal,
        }

    async def handle(
        self, action: str, headers: dict[str, str], body: bytes, params: Any
    ) -> dict[str, Any]:
        """The ``Response`` object for one action (errors included)."""
        request_id = str(uuid.uuid4())
        try:
            verify_signature(self.credentials, headers, body)
            handler = self._actions.get(action)
            if handler is None:
                raise ServiceError("InvalidAction", f"the TCR action {action!r} is not emulated")
            if not isinstance(params, dict):
                raise ServiceError("InvalidParameter", "the body must be a JSON object")
            region = headers.get("x-tc-region", "ap-guangzhou")
            with self._lock:
                result = handler(params, region)
        except ServiceError as exc:
            return {"Error": {"Code": exc.code, "Message": exc.message}, "RequestId": request_id}
        return {**result, "RequestId": request_id}

    # -- TCR Enterprise ----------------------------------------------------------------------

    def _registry(self, params: dict[str, Any]) -> _Registry:
        if params.get("RegistryId") != self.registry.registry_id:
            raise ServiceError(
                "ResourceNotFound", f"registry instance {params.get('RegistryId')!r} not found"
            )
        return self.registry

    def _describe_instances(self, params: dict[str, Any], region: str) -> dict[str, Any]:
        wanted = params.get("Registryids") or []
        found = [self.registry] if not wanted or self.registry.registry_id in wanted else []
        return {"TotalCount": len(found), "Registries": [r.to_api(region) for r in found]}

    def _create_namespace(self, params: dict[str, Any], region: str) -> dict[str, Any]:
        registry = self._registry(params)
        name = str(params.get("NamespaceName") or "")
        _check_namespace(name)
        if name in registry.namespaces:
            raise ServiceError("InvalidParameter.ErrNamespaceExist", f"namespace {name!r} exists")
        registry.namespaces[name] = time.time()
        return {}

    def _describe_namespaces(self, params: dict[str, Any], region: str) -> dict[str, Any]:
        registry = self._registry(params)
        wanted = params.get("NamespaceName")
        names = sorted(n for n in registry.namespaces if not wanted or n == wanted)
        offset, limit = int(params.get("Offset") or 0), int(params.get("Limit") or 20)
        page = names if params.get("All") else names[offset : offset + limit]
        return {
            "NamespaceList": [
                {
                    "Name": name,
                    "CreationTime": rfc3339(registry.namespaces[name]),
                    "Public": False,
                    "NamespaceId": index + 1,
                    "TagSpecification": {"ResourceType": "namespace", "Tags": []},
                    "Metadata": [],
                    "CVEWhitelistItems": [],
                    "AutoScan": False,
                    "PreventVUL": False,
                    "Severity": "",
                }
                for index, name in enumerate(page)
            ],
            "TotalCount": len(names),
        }

    def _create_repository(self, params: dict[str, Any], region: str) -> dict[str, Any]:
        registry = self._registry(params)
        namespace = str(params.get("NamespaceName") or "")
        name = str(params.get("RepositoryName") or "")
        if namespace not in registry.namespaces:
            raise ServiceError("ResourceNotFound.ErrNoNamespace", f"no namespace {namespace!r}")
        _check_repository(name)
        if (namespace, name) in registry.repositories:
            raise ServiceError("InvalidParameter.ErrRepoExist", f"{namespace}/{name} exists")
        registry.repositories[namespace, name] = time.time()
        return {}

    def _describe_repositories(self, params: dict[str, Any], region: str) -> dict[str, Any]:
        registry = self._registry(params)
        namespace = params.get("NamespaceName")
        wanted = params.get("RepositoryName")
        keys = sorted(
            key
            for key in registry.repositories
            if (not namespace or key[0] == namespace) and (not wanted or key[1] == wanted)
        )
        offset, limit = int(params.get("Offset") or 0), int(params.get("Limit") or 20)
        return {
            "RepositoryList": [
                {
                    "Name": f"{ns}/{repo}",
                    "Namespace": ns,
                    "CreationTime": rfc3339(registry.repositories[ns, repo]),
                    "UpdateTime": rfc3339(registry.repositories[ns, repo]),
                    "Public": False,
                    "Description": "",
                    "BriefDescription": "",
                }
                for ns, repo in keys[offset : offset + limit]
            ],
            "TotalCount": len(keys),
        }

    def _create_token(self, params: dict[str, Any], region: str) -> dict[str, Any]:
        self._registry(params)
        token_type = params.get("TokenType") or "temp"
        if token_type not in ("temp", "longterm"):
            raise ServiceError("InvalidParameter", f"invalid TokenType {token_type!r}")
        username, token = self.login or (_UIN, secrets.token_urlsafe(32))
        self.tokens.append(token)
        lifetime = 3600 if token_type == "temp" else 365 * 24 * 3600
        return {
            "Username": username,
            "Token": token,
            "ExpTime": int((time.time() + lifetime) * 1000),
            "TokenId": new_id("tk"),
        }

    # -- CCR Personal ------------------------------------------------------------------------

    def _create_namespace_personal(self, params: dict[str, Any], region: str) -> dict[str, Any]:
        name = str(params.get("Namespace") or "")
        _check_namespace(name)
        if name in self.personal_namespaces:
            raise ServiceError("InvalidParameter.ErrNamespaceExist", f"namespace {name!r} exists")
        self.personal_namespaces[name] = time.time()
        return {}

    def _describe_namespaces_personal(self, params: dict[str, Any], region: str) -> dict[str, Any]:
        wanted = params.get("Namespace")
        names = sorted(n for n in self.personal_namespaces if not wanted or n == wanted)
        offset, limit = int(params.get("Offset") or 0), int(params.get("Limit") or 20)
        infos = [
            {
                "Namespace": name,
                "CreationTime": rfc3339(self.personal_namespaces[name]),
                "RepoCount": sum(1 for r in self.personal_repositories if r.startswith(name + "/")),
            }
            for name in names[offset : offset + limit]
        ]
        return {"Data": {"NamespaceCount": len(names), "NamespaceInfo": infos}}

    def _create_repository_personal(self, params: dict[str, Any], region: str) -> dict[str, Any]:
        name = str(params.get("RepoName") or "")
        namespace, _, repository = name.partition("/")
        if namespace not in self.personal_namespaces:
            raise ServiceError("ResourceNotFound.ErrNoNamespace", f"no namespace {namespace!r}")
        _check_repository(repository)
        if name in self.personal_repositories:
            raise ServiceError("InvalidParameter.ErrRepoExist", f"repository {name!r} exists")
        self.personal_repositories[name] = time.time()
        return {}

    def _describe_repositories_personal(
        self, params: dict[str, Any], region: str
    ) -> dict[str, Any]:
        wanted = params.get("RepoName")
        names = sorted(n for n in self.personal_repositories if not wanted or n == wanted)
        offset, limit = int(params.get("Offset") or 0), int(params.get("Limit") or 20)
        infos = [
            {
                "RepoName": name,
                "RepoType": "personal",
                "TagCount": 0,
                "Public": 0,
                "IsUserFavor": False,
                "IsQcloudOfficial": False,
                "FavorCount": 0,
                "PullCount": 0,
                "Description": "",
                "CreationTime": rfc3339(self.personal_repositories[name]),
                "UpdateTime": rfc3339(self.personal_repositories[name]),
            }
            for name in names[offset : offset + limit]
        ]
        return {
            "Data": {"TotalCount": len(names), "RepoInfo": infos, "Server": self.personal_domain}
        }
