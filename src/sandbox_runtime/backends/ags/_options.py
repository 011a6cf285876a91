"""Options of the ``ags`` backend, with the environment variables users already set for AGS.

Every option may be given in ``SandboxConfig.options``; those left out are read from the
environment (never written to it): ``TENCENTCLOUD_SECRET_ID``/``TENCENTCLOUD_SECRET_KEY``
(and ``TENCENTCLOUD_SESSION_TOKEN``), ``E2B_API_KEY``, ``AGS_REGION``, ``AGS_TOOL_NAME``,
``AGS_TOOL_ID``, ``AGS_TOOL_MAPPING``, ``AGS_ENDPOINT`` and ``E2B_DOMAIN``.  That is what lets
``sandbox-runtime run --backend ags`` work with nothing but exported variables.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, SecretStr, model_validator

from sandbox_runtime.backend_kit import (
    BackendOptions,
    limiter_for,
)
from sandbox_runtime.backend_kit.agent import E2bApi
from sandbox_runtime.errors import ConfigError

from ._cloud import AgsCloudClient
from ._environment import fill_from_environment

__all__ = ["AgsOptions", "cloud_client", "e2b_api"]


class AgsOptions(BackendOptions):
    """Options of the ``ags`` backend (see ``docs/ags-emulator.md`` for a worked example)."""

    control_plane: Literal["auto", "cloud", "e2b"] = "auto"
    """``cloud``: Tencent Cloud API with SecretId/SecretKey; ``e2b``: the E2B-compatible API
    with an ``ark_`` key; ``auto``: ``cloud`` when a SecretId/SecretKey is set, else ``e2b``."""
    region: str = "ap-guangzhou"
    """AGS region, e.g. ``ap-guangzhou``, ``ap-shanghai``, ``ap-singapore``."""
    secret_id: SecretStr | None = None
    """Tencent Cloud SecretId (default ``TENCENTCLOUD_SECRET_ID``)."""
    secret_key: SecretStr | None = None
    """Tencent Cloud SecretKey (default ``TENCENTCLOUD_SECRET_KEY``)."""
    session_token: SecretStr | None = None
    """STS token for temporary credentials (default ``TENCENTCLOUD_SESSION_TOKEN``)."""
    api_key: SecretStr | None = None
    """``ark_`` API key of the E2B-compatible API (default ``E2B_API_KEY``)."""
    tool_name: str | None = None
    """Sandbox tool (template) to start instances from (default ``AGS_TOOL_NAME``)."""
    tool_id: str | None = None
    """Sandbox tool id, instead of its name (default ``AGS_TOOL_ID``)."""
    tool_mapping: Path | None = None
    """Image -> tool mapping written by ``sandbox-runtime ags sync`` (default
    ``AGS_TOOL_MAPPING``): each sandbox starts from the tool of its ``image``, found in this
    file (read once per process) rather than by asking the control plane.  Images missing
    from it use ``tool_name``/``tool_id`` with the image as an override, or fail if neither
    is set."""
    image_registry_type: Literal["enterprise", "personal", "custom", "system"] = "enterprise"
    """Registry of ``SandboxConfig.image`` when it overrides the tool's image (cloud only)."""
    precache_budget: int | None = Field(default=None, gt=0)
    """Bytes of service-side image pre-cache (``prefetch_images``) this run may keep; beyond
    it the entries it asked for that the schedule no longer names are deleted, least recently
    used first.  ``None``: pre-caches are left to the service's own expiry."""
    internal: bool = False
    """Use Tencent Cloud's internal endpoints (from machines inside Tencent Cloud)."""
    endpoint: str | None = None
    """One ``http(s)://host:port`` serving every AGS protocol: the local emulator
    (default ``AGS_ENDPOINT``).  Overrides the three endpoints below."""
    cloud_endpoint: str | None = None
    """Cloud API host, default ``ags.tencentcloudapi.com`` (or its internal name)."""
    api_url: str | None = None
    """E2B-compatible API URL, default ``https://api.<domain>``."""
    domain: str | None = None
    """Data-plane domain, default ``<region>.tencentags.com`` (default ``E2B_DOMAIN``)."""
    sandbox_url: str | None = None
    """One envd URL for every instance (routing by header); default: per-instance hosts."""
    auth_mode: Literal["DEFAULT", "TOKEN", "NONE", "PUBLIC"] | None = None
    """Data-plane ``AuthMode`` of started instances (cloud only); default: the service's."""
    request_timeout: float = Field(default=60.0, gt=0)
    """Seconds before one control-plane or data-plane request is abandoned."""
    api_qps: float | None = Field(default=None, gt=0)
    """Control-plane requests per second this process sends (Cloud API or E2B API), shared
    by all its sandboxes; ``None``: no client-side quota (a rate-limit answer still pauses
    every call).  Set it to your account's StartSandboxInstance quota to stay under it."""
    api_burst: int | None = Field(default=None, ge=1)
    """Control-plane requests allowed at once above ``api_qps`` (default: one second's worth)."""
    memory_snapshots: bool = False
    """Ask the service to keep memory (running processes) too: checkpoints are
    ``CreateSandboxSnapshot`` with ``Memory`` true and ``pause()`` is ``PauseSandboxInstance``
    with ``Memory`` true, and the backend declares ``checkpoint_memory`` and ``pause``.  Beta
    on the service and untested here (the AGS emulator keeps files only).  Off (the default),
    checkpoints keep the filesystem and ``pause`` is not declared: a pause without memory
    ends the processes, which ``pause`` promises to keep.  Cloud control plane only."""
    envd_version: str = "0.5.7"
    """envd version assumed for instances started through the Cloud API (the E2B API says)."""

    @model_validator(mode="before")
    @classmethod
    def _from_environment(cls, data: Any) -> Any:
        return fill_from_environment(data, cls.model_fields)

    @property
    def has_cloud_credentials(self) -> bool:
        """True when both a SecretId and a SecretKey are known."""
        return self.secret_id is not None and self.secret_key is not None

    @property
    def resolved_control_plane(self) -> Literal["cloud", "e2b"]:
        """The control plane ``auto`` resolves to."""
        if self.control_plane != "auto":
            return self.control_plane
        return "cloud" if self.has_cloud_credentials else "e2b"

    @property
    def resolved_domain(self) -> str:
        """The data-plane domain."""
        if self.domain:
            return self.domain
        middle = ".internal" if self.internal else ""
        return f"{self.region}{middle}.tencentags.com"

    def cloud_target(self) -> tuple[str, str | None]:
        """``(scheme, host[:port])`` of the Cloud API; ``None`` host means the SDK default."""
        if self.endpoint:
            scheme, _, host = self.endpoint.partition("://")
            return scheme, host.rstrip("/")
        if self.cloud_endpoint:
            return "https", self.cloud_endpoint
        if self.internal:
            return "https", "ags.internal.tencentcloudapi.com"
        return "https", None

    def e2b_urls(self) -> tuple[str | None, str | None]:
        """``(api_url, sandbox_url)``; ``None`` means the defaults derived from the domain."""
        if self.endpoint:
            base = self.endpoint.rstrip("/")
            return base, base
        api_url = self.api_url
        if api_url is None and self.internal:
            api_url = f"https://api.{self.resolved_domain}"
        return api_url, self.sandbox_url


def e2b_api(opts: AgsOptions) -> E2bApi:
    """An E2B-compatible API client for these options (``ConfigError`` without an API key)."""
    if opts.api_key is None:
        raise ConfigError("the ags backend's e2b control plane needs E2B_API_KEY (ark_...)")
    api_url, _sandbox_url = opts.e2b_urls()
    url = api_url or f"https://api.{opts.resolved_domain}"
    return E2bApi(
        url,
        opts.api_key,
        request_timeout=opts.request_timeout,
        limiter=limiter_for(f"ags-e2b:{url}", opts.api_qps, opts.api_burst),
    )


def cloud_client(opts: AgsOptions) -> AgsCloudClient:
    """A Cloud API client for these options (``ConfigError`` without a SecretId/SecretKey)."""
    if opts.secret_id is None or opts.secret_key is None:
        raise ConfigError(
            "the ags backend's cloud control plane needs a SecretId and SecretKey "
            "(TENCENTCLOUD_SECRET_ID / TENCENTCLOUD_SECRET_KEY)"
        )
    scheme, host = opts.cloud_target()
    return AgsCloudClient(
        secret_id=opts.secret_id,
        secret_key=opts.secret_key,
        session_token=opts.session_token,
        region=opts.region,
        endpoint=host,
        scheme=scheme,
        request_timeout=opts.request_timeout,
        limiter=limiter_for(f"ags-cloud:{scheme}://{host}", opts.api_qps, opts.api_burst),
    )
