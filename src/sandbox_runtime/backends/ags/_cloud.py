"""Typed clients of Tencent Cloud APIs (AGS here, TCR in ``tcr``), with safe retries.

:class:`CloudApiClient` is the transport every Tencent Cloud API shares (signing through the
official SDK, retries, error translation, secret hygiene); :class:`AgsCloudClient` adds the
AGS actions.  Shared by the ``ags`` backend, tool management, sync and the ``ags`` commands,
so that all of them retry the same way and raise the same errors:

* Calls marked idempotent (reads, stops, and starts carrying a ``ClientToken``) are retried on
  network errors, gateway errors (non-200 answers), ``InternalError`` and rate limits, with
  jittered, bounded backoff (:mod:`sandbox_runtime._core.retry`).  Other calls are retried only on
  ``RequestLimitExceeded``, which the service answers without doing anything.
* Errors leave as :class:`AgsApiError` (a :class:`~sandbox_runtime.errors.BackendError`)
  carrying the service's code and request id, or :class:`AgsAuthError` for refused
  credentials; the SDK's exception is chained.
* Secrets never leave: credentials are ``SecretStr`` here, the SDK's own debug logging of
  whole requests and answers (which carry the SecretId and data-plane tokens) is filtered
  out, and every message is scrubbed of the secrets this client knows.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import SecretStr

from sandbox_runtime.backend_kit import (
    RateLimiter,
    RetryPolicy,
    call_with_retries,
)
from sandbox_runtime.errors import BackendError, BackendUnavailableError

try:
    from tencentcloud.common import credential
    from tencentcloud.common.abstract_client import AbstractClient
    from tencentcloud.common.exception.tencent_cloud_sdk_exception import (
        TencentCloudSDKException,
    )
    from tencentcloud.common.profile.client_profile import ClientProfile
    from tencentcloud.common.profile.http_profile import HttpProfile
except ImportError as exc:  # pragma: no cover - exercised through the registry's message
    raise ImportError(
        "the AGS Cloud API client needs tencentcloud-sdk-python-ags: "
        "pip install 'sandbox-runtime-swe[ags]'"
    ) from exc

__all__ = [
    "API_VERSION",
    "PAGE_LIMIT",
    "AgsApiError",
    "AgsAuthError",
    "AgsCloudClient",
    "CloudApiClient",
    "InstanceInfo",
    "InstanceToken",
    "SnapshotInfo",
    "redact",
]

logger = logging.getLogger("sandbox_runtime.ags")

API_VERSION = "2025-09-20"
DEFAULT_ENDPOINT = "ags.tencentcloudapi.com"
INTERNAL_ENDPOINT = "ags.internal.tencentcloudapi.com"
_SDK_LOGGER = "tencentcloud_sdk_common"
_TRANSIENT_CODES = frozenset(
    {
        "ClientNetworkError",
        "ServerNetworkError",
        "InternalError",
        "RequestLimitExceeded",
        "FailedOperation.RequestInProgress",
        "ResourceUnavailable.ImagePreheating",
    }
)
_RATE_LIMIT_CODES = frozenset({"RequestLimitExceeded"})
#: The largest page every listing action accepts (``Limit`` / ``MaxResults``).
PAGE_LIMIT = 100


#: The Cloud API's quotas are requests per second and its refusal carries no Retry-After: a
#: refusal pauses the control plane for one quota window.
_RATE_LIMIT_PAUSE = 1.0


def _rate_limit_pause(exc: BaseException) -> float | None:
    """The pause a Cloud API refusal calls for: one second for ``RequestLimitExceeded``."""
    if isinstance(exc, AgsApiError) and exc.code in _RATE_LIMIT_CODES:
        return _RATE_LIMIT_PAUSE
    return None


def redact(text: str, secrets: Sequence[str]) -> str:
    """``text`` with every non-trivial secret replaced by ``***``."""
    for secret in secrets:
        if secret and len(secret) >= 4:
            text = text.replace(secret, "***")
    return text


class _DropSdkWireLogs(logging.Filter):
    """Drops the SDK's debug records that print whole requests and answers."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = str(record.msg)
        return not message.startswith(("SendRequest", "GetResponse"))


_filter_lock = threading.Lock()


def _install_log_filter() -> None:
    with _filter_lock:
        sdk_logger = logging.getLogger(_SDK_LOGGER)
        if not any(isinstance(f, _DropSdkWireLogs) for f in sdk_logger.filters):
            sdk_logger.addFilter(_DropSdkWireLogs())


class AgsApiError(BackendError):
    """The Cloud API answered an error (or could not be reached); see :attr:`code`."""

    def __init__(
        self, code: str, message: str, request_id: str | None = None, *, service: str = "AGS"
    ) -> None:
        detail = f"{service} {code}: {message}"
        if request_id:
            detail += f" (RequestId {request_id})"
        super().__init__(detail)
        self.code = code
        self.request_id = request_id

    @property
    def is_not_found(self) -> bool:
        """True for ``ResourceNotFound.*``."""
        return self.code.startswith("ResourceNotFound")


class AgsAuthError(AgsApiError, BackendUnavailableError):
    """The credentials were refused (``AuthFailure.*``): nothing will work until they change."""


@dataclass(frozen=True)
class InstanceInfo:
    """The parts of a ``SandboxInstance`` the library acts on (``raw`` has all of it)."""

    instance_id: str
    tool_id: str
    tool_name: str
    status: str
    expires_at: str
    stop_reason: str
    raw: Mapping[str, Any] = field(repr=False)

    @classmethod
    def from_api(cls, data: Mapping[str, Any]) -> InstanceInfo:
        """Build from the Cloud API structure."""
        return cls(
            instance_id=str(data.get("InstanceId", "")),
            tool_id=str(data.get("ToolId", "")),
            tool_name=str(data.get("ToolName", "")),
            status=str(data.get("Status", "")),
            expires_at=str(data.get("ExpiresAt", "")),
            stop_reason=str(data.get("StopReason", "") or ""),
            raw=dict(data),
        )

    @property
    def metadata(self) -> dict[str, str]:
        """The instance's ``Metadata`` as a dict (where this library keeps its labels)."""
        items = self.raw.get("Metadata") or []
        return {str(m.get("Name")): str(m.get("Value", "")) for m in items if m.get("Name")}


@dataclass(frozen=True)
class InstanceToken:
    """A data-plane token; its value is a ``SecretStr`` so it never prints."""

    token: SecretStr
    expires_at: str


@dataclass(frozen=True)
class SnapshotInfo:
    """A ``SandboxSnapshot`` (``CreateSandboxSnapshot``, ``DescribeSandboxSnapshotList``)."""

    snapshot_id: str
    name: str
    source_instance_id: str
    memory_included: bool
    status: str
    """``ACTIVE``, ``DELETING`` or ``DELETED`` as the SDK's model lists them."""
    status_reason: str
    tags: dict[str, str]
    create_time: str

    @classmethod
    def from_api(cls, data: Mapping[str, Any]) -> SnapshotInfo:
        """Build from the Cloud API structure."""
        tags = {
            str(t.get("Key")): str(t.get("Value", ""))
            for t in data.get("Tags") or []
            if t.get("Key")
        }
        return cls(
            snapshot_id=str(data.get("SnapshotId", "")),
            name=str(data.get("SnapshotName", "") or ""),
            source_instance_id=str(data.get("SourceInstanceId", "") or ""),
            memory_included=bool(data.get("MemoryIncluded")),
            status=str(data.get("Status", "") or ""),
            status_reason=str(data.get("StatusReason", "") or ""),
            tags=tags,
            create_time=str(data.get("CreateTime", "") or ""),
        )


class _AgsSdkClient(AbstractClient):  # type: ignore[misc]
    """The SDK's generic client for the ``ags`` service (``call_json`` on any action)."""

    _apiVersion = API_VERSION
    _endpoint = DEFAULT_ENDPOINT
    _service = "ags"


class CloudApiClient:
    """One Tencent Cloud API service for one account and region; safe to share between threads.

    Subclasses name the SDK client class of their service (:attr:`sdk_client`); signing,
    the wire format and the endpoint handling are the official SDK's, so what works against
    the real service works against the emulator with only the endpoint changed.
    """

    #: The SDK client class (an ``AbstractClient`` with the service's version and endpoint).
    sdk_client: Any = _AgsSdkClient
    #: Name of the service in messages.
    label = "AGS"

    def __init__(
        self,
        *,
        secret_id: SecretStr,
        secret_key: SecretStr,
        region: str,
        session_token: SecretStr | None = None,
        endpoint: str | None = None,
        scheme: str = "https",
        request_timeout: float = 60.0,
        retry_policy: RetryPolicy | None = None,
        limiter: RateLimiter | None = None,
    ) -> None:
        _install_log_filter()
        self.region = region
        self.endpoint = endpoint or str(self.sdk_client._endpoint)
        self.scheme = scheme
        self._secrets = [
            s.get_secret_value() for s in (secret_id, secret_key, session_token) if s is not None
        ]
        http_profile = HttpProfile(
            protocol=scheme, endpoint=self.endpoint, reqTimeout=int(max(request_timeout, 1))
        )
        profile = ClientProfile(httpProfile=http_profile)
        cred = credential.Credential(
            secret_id.get_secret_value(),
            secret_key.get_secret_value(),
            session_token.get_secret_value() if session_token is not None else None,
        )
        self._client = self.sdk_client(cred, region, profile)
        self._policy = retry_policy or RetryPolicy(attempts=6, max_delay=90.0)
        self._limiter = limiter

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(region={self.region!r}, "
            f"endpoint={self.scheme}://{self.endpoint})"
        )

    # -- transport ---------------------------------------------------------------------------

    def _translate(self, exc: TencentCloudSDKException) -> AgsApiError:
        code = str(exc.get_code() or "UnknownError")
        message = redact(str(exc.get_message() or ""), self._secrets)
        if code in ("ServerNetworkError", "ClientNetworkError") and len(message) > 300:
            message = message[:300] + "..."
        error_cls = AgsAuthError if code.startswith("AuthFailure") else AgsApiError
        return error_cls(code, message, exc.get_request_id(), service=self.label)

    def call(self, action: str, params: Mapping[str, Any], *, idempotent: bool) -> dict[str, Any]:
        """Call one action and return its ``Response`` object (without ``RequestId``).

        ``idempotent`` says whether repeating the call is harmless (reads, deletes, creates
        carrying a ``ClientToken``); only then are network errors and server errors retried,
        since a lost answer may hide a change that was made.
        """
        retryable = _TRANSIENT_CODES if idempotent else _RATE_LIMIT_CODES

        def once() -> dict[str, Any]:
            try:
                answer = self._client.call_json(action, dict(params))
            except TencentCloudSDKException as exc:
                raise self._translate(exc) from exc
            except (OSError, ValueError) as exc:  # a body that is not JSON, a broken socket
                raise AgsApiError(
                    "ClientNetworkError", redact(str(exc), self._secrets), service=self.label
                ) from exc
            response = dict(answer.get("Response") or {})
            response.pop("RequestId", None)
            return response

        def is_retryable(exc: BaseException) -> bool:
            return isinstance(exc, AgsApiError) and exc.code in retryable

        result: dict[str, Any] = call_with_retries(
            once,
            is_retryable,
            description=f"{self.label} {action}",
            policy=self._policy,
            retry_after=_rate_limit_pause,
            limiter=self._limiter,
        )
        logger.debug("%s %s done", self.label, action)
        return result

    def pages(
        self,
        action: str,
        params: Mapping[str, Any],
        items_key: str,
        *,
        page_size: int = PAGE_LIMIT,
    ) -> Iterator[dict[str, Any]]:
        """Every item of an ``Offset``/``Limit`` listing, one request per page.

        Stops at ``TotalCount`` or at a short page, whichever comes first, so a listing that
        changes while it is read ends rather than looping.
        """
        offset = 0
        while True:
            page = self.call(
                action, {**params, "Offset": offset, "Limit": page_size}, idempotent=True
            )
            items = list(page.get(items_key) or [])
            yield from items
            offset += len(items)
            total = int(page.get("TotalCount") or 0)
            if len(items) < page_size or (total and offset >= total):
                return


class AgsCloudClient(CloudApiClient):
    """Typed AGS Cloud API calls (``tencentcloud-sdk-python-ags``, version 2025-09-20)."""

    sdk_client = _AgsSdkClient
    label = "AGS"

    # -- instances ---------------------------------------------------------------------------

    def start_instance(
        self,
        *,
        tool_id: str | None = None,
        tool_name: str | None = None,
        timeout: str | None = None,
        client_token: str | None = None,
        custom_configuration: Mapping[str, Any] | None = None,
        metadata: Mapping[str, str] | None = None,
        auth_mode: str | None = None,
        snapshot_id: str | None = None,
        source_instance_id: str | None = None,
    ) -> InstanceInfo:
        """``StartSandboxInstance``; idempotent (so retried) when ``client_token`` is given.

        ``snapshot_id`` starts the instance from a snapshot, ``source_instance_id`` as a
        clone of a running instance (the service refuses both at once).
        """
        params: dict[str, Any] = {}
        if tool_id:
            params["ToolId"] = tool_id
        if tool_name:
            params["ToolName"] = tool_name
        if snapshot_id:
            params["SnapshotId"] = snapshot_id
        if source_instance_id:
            params["SourceInstanceId"] = source_instance_id
        if timeout:
            params["Timeout"] = timeout
        if client_token:
            params["ClientToken"] = client_token
        if custom_configuration:
            params["CustomConfiguration"] = dict(custom_configuration)
        if metadata:
            params["Metadata"] = [{"Name": k, "Value": v} for k, v in metadata.items()]
        if auth_mode:
            params["AuthMode"] = auth_mode
        answer = self.call("StartSandboxInstance", params, idempotent=bool(client_token))
        return InstanceInfo.from_api(answer.get("Instance") or {})

    def describe_instances(
        self,
        instance_ids: Sequence[str] = (),
        *,
        tool_id: str | None = None,
        filters: Mapping[str, Sequence[str]] | None = None,
        limit: int = 100,
    ) -> list[InstanceInfo]:
        """``DescribeSandboxInstanceList`` (one page)."""
        params: dict[str, Any] = {"Limit": limit}
        if instance_ids:
            params["InstanceIds"] = list(instance_ids)
        if tool_id:
            params["ToolId"] = tool_id
        if filters:
            params["Filters"] = _filters(filters)
        answer = self.call("DescribeSandboxInstanceList", params, idempotent=True)
        return [InstanceInfo.from_api(item) for item in answer.get("InstanceSet") or []]

    def describe_instance(self, instance_id: str) -> InstanceInfo | None:
        """One instance, or ``None`` if the service does not know it."""
        try:
            found = self.describe_instances([instance_id])
        except AgsApiError as exc:
            if exc.is_not_found:
                return None
            raise
        return next((i for i in found if i.instance_id == instance_id), None)

    def iter_instances(
        self,
        *,
        tool_id: str | None = None,
        filters: Mapping[str, Sequence[str]] | None = None,
    ) -> Iterator[InstanceInfo]:
        """Every instance ``DescribeSandboxInstanceList`` lists, page by page."""
        params: dict[str, Any] = {}
        if tool_id:
            params["ToolId"] = tool_id
        if filters:
            params["Filters"] = _filters(filters)
        for item in self.pages("DescribeSandboxInstanceList", params, "InstanceSet"):
            yield InstanceInfo.from_api(item)

    def stop_instance(self, instance_id: str) -> None:
        """``StopSandboxInstance`` (stopping twice is safe to retry)."""
        self.call("StopSandboxInstance", {"InstanceId": instance_id}, idempotent=True)

    def acquire_token(self, instance_id: str) -> InstanceToken:
        """``AcquireSandboxInstanceToken``: the ``X-Access-Token`` for envd."""
        answer = self.call(
            "AcquireSandboxInstanceToken", {"InstanceId": instance_id}, idempotent=True
        )
        return InstanceToken(SecretStr(str(answer.get("Token", ""))), str(answer.get("ExpiresAt")))

    def pause_instance(self, instance_id: str, *, memory: bool) -> str:
        """``PauseSandboxInstance``; returns ``InstanceStatus`` (``PAUSING``, ``PAUSED``, ...).

        Not retried on errors other than the rate limit: a pause whose answer was lost may
        have begun, and a second one is refused while the first runs; the caller polls.
        """
        answer = self.call(
            "PauseSandboxInstance",
            {"InstanceId": instance_id, "Memory": memory},
            idempotent=False,
        )
        return str(answer.get("InstanceStatus", ""))

    def resume_instance(self, instance_id: str, *, timeout: str | None = None) -> None:
        """``ResumeSandboxInstance`` (``Timeout``: the resumed instance's new lifetime)."""
        params: dict[str, Any] = {"InstanceId": instance_id}
        if timeout:
            params["Timeout"] = timeout
        self.call("ResumeSandboxInstance", params, idempotent=False)

    # -- snapshots ---------------------------------------------------------------------------

    def create_snapshot(
        self,
        instance_id: str,
        *,
        name: str,
        memory: bool,
        tags: Mapping[str, str],
        client_token: str,
    ) -> SnapshotInfo:
        """``CreateSandboxSnapshot`` (beta); retried, since ``client_token`` makes it idempotent."""
        params: dict[str, Any] = {
            "InstanceId": instance_id,
            "SnapshotName": name,
            "Memory": memory,
            "Tags": [{"Key": k, "Value": v} for k, v in tags.items()],
            "ClientToken": client_token,
        }
        answer = self.call("CreateSandboxSnapshot", params, idempotent=True)
        return SnapshotInfo.from_api(answer.get("Snapshot") or {})

    def describe_snapshots(self, snapshot_ids: Sequence[str]) -> list[SnapshotInfo]:
        """``DescribeSandboxSnapshotList`` of these ids (one page)."""
        params: dict[str, Any] = {"SnapshotIds": list(snapshot_ids), "Limit": PAGE_LIMIT}
        answer = self.call("DescribeSandboxSnapshotList", params, idempotent=True)
        return [SnapshotInfo.from_api(item) for item in answer.get("SnapshotSet") or []]

    def iter_snapshots(
        self, *, filters: Mapping[str, Sequence[str]] | None = None
    ) -> Iterator[SnapshotInfo]:
        """Every snapshot ``DescribeSandboxSnapshotList`` lists, page by page."""
        params: dict[str, Any] = {"Filters": _filters(filters)} if filters else {}
        for item in self.pages("DescribeSandboxSnapshotList", params, "SnapshotSet"):
            yield SnapshotInfo.from_api(item)

    def delete_snapshot(self, snapshot_id: str) -> None:
        """``DeleteSandboxSnapshot`` (retried: a second delete answers ``ResourceNotFound``)."""
        self.call("DeleteSandboxSnapshot", {"SnapshotId": snapshot_id}, idempotent=True)

    # -- tools -------------------------------------------------------------------------------

    def describe_tools(
        self,
        tool_ids: Sequence[str] = (),
        *,
        filters: Mapping[str, Sequence[str]] | None = None,
        offset: int = 0,
        limit: int = 100,
    ) -> tuple[list[dict[str, Any]], int]:
        """``DescribeSandboxToolList``: one page of ``SandboxTool`` objects and the total."""
        params: dict[str, Any] = {"Offset": offset, "Limit": limit}
        if tool_ids:
            params["ToolIds"] = list(tool_ids)
        if filters:
            params["Filters"] = _filters(filters)
        answer = self.call("DescribeSandboxToolList", params, idempotent=True)
        return list(answer.get("SandboxToolSet") or []), int(answer.get("TotalCount") or 0)

    def iter_tools(
        self, *, filters: Mapping[str, Sequence[str]] | None = None
    ) -> Iterator[dict[str, Any]]:
        """Every ``SandboxTool`` the account has (matching ``filters``), page by page."""
        params: dict[str, Any] = {"Filters": _filters(filters)} if filters else {}
        yield from self.pages("DescribeSandboxToolList", params, "SandboxToolSet")

    def describe_tools_by_id(self, tool_ids: Sequence[str]) -> list[dict[str, Any]]:
        """The tools with these ids, in batches of the 100 ids one request may name."""
        found: list[dict[str, Any]] = []
        ids = list(dict.fromkeys(tool_ids))
        for start in range(0, len(ids), PAGE_LIMIT):
            batch = ids[start : start + PAGE_LIMIT]
            tools, _total = self.describe_tools(batch, limit=PAGE_LIMIT)
            found += tools
        return found

    def create_tool(self, params: Mapping[str, Any]) -> str:
        """``CreateSandboxTool``; returns the ``ToolId``.

        With a ``ClientToken`` in ``params`` the call is idempotent on the service's side, so
        it is retried on network and server errors: a retry after a lost answer returns the
        tool the first attempt made instead of a second one.
        """
        idempotent = bool(params.get("ClientToken"))
        answer = self.call("CreateSandboxTool", params, idempotent=idempotent)
        return str(answer.get("ToolId", ""))

    def delete_tool(self, tool_id: str) -> None:
        """``DeleteSandboxTool`` (retried: deleting twice fails with ``ResourceNotFound``)."""
        self.call("DeleteSandboxTool", {"ToolId": tool_id}, idempotent=True)

    # -- image pre-cache -----------------------------------------------------------------

    def create_precache(self, image: str, registry_type: str) -> dict[str, Any]:
        """``CreatePreCacheImageTask``: have the service cache ``image`` ahead of starts.

        Retried: a second task for an image already cached or caching costs nothing.
        """
        params = {"Image": image, "ImageRegistryType": registry_type}
        return self.call("CreatePreCacheImageTask", params, idempotent=True)

    def iter_precache(
        self, *, filters: Mapping[str, Sequence[str]] | None = None
    ) -> Iterator[dict[str, Any]]:
        """Every ``PreCacheImage`` of ``DescribePreCacheImageList`` (``NextToken`` paging)."""
        params: dict[str, Any] = {"MaxResults": PAGE_LIMIT}
        if filters:
            params["Filters"] = _filters(filters)
        while True:
            page = self.call("DescribePreCacheImageList", params, idempotent=True)
            yield from page.get("PreCacheImageList") or []
            token = page.get("NextToken")
            if not token:
                return
            params = {**params, "NextToken": token}

    def delete_precache(self, precache_id: str) -> None:
        """``DeletePreCacheImage`` of one pre-cache entry."""
        self.call("DeletePreCacheImage", {"PreCacheImageId": precache_id}, idempotent=True)


def _filters(filters: Mapping[str, Sequence[str]]) -> list[dict[str, Any]]:
    """``{"Status": ["RUNNING"]}`` as the API's ``[{"Name": ..., "Values": [...]}]``."""
    return [{"Name": name, "Values": list(values)} for name, values in filters.items()]
