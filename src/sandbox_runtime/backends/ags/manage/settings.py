"""Where and as whom to call AGS and TCR: explicit values first, then the environment.

The ``ags`` commands and the library functions build their Cloud API clients here, from the
same variables the ``ags`` backend reads (``TENCENTCLOUD_SECRET_ID``/``_KEY``/``_SESSION_TOKEN``,
``AGS_REGION``, ``AGS_ENDPOINT``), so one set of exported variables serves training runs and
tool management alike.  Secrets stay ``SecretStr`` until the SDK signs with them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator

from sandbox_runtime.backends.ags._environment import fill_from_environment
from sandbox_runtime.errors import ConfigError

if TYPE_CHECKING:
    from sandbox_runtime.backends.ags._cloud import AgsCloudClient, CloudApiClient

    from .tcr import TcrCloudClient

    _C = TypeVar("_C", bound=CloudApiClient)

__all__ = ["AgsConnection", "split_endpoint"]


def split_endpoint(endpoint: str) -> tuple[str, str]:
    """``"http://127.0.0.1:8900"`` as ``("http", "127.0.0.1:8900")``; a bare host is https."""
    scheme, sep, host = endpoint.partition("://")
    if not sep:
        return "https", endpoint.rstrip("/")
    if scheme not in ("http", "https"):
        raise ConfigError(f"endpoint {endpoint!r}: the scheme must be http or https")
    return scheme, host.rstrip("/")


class AgsConnection(BaseModel):
    """Credentials, region and endpoints of the AGS and TCR Cloud APIs."""

    model_config = ConfigDict(extra="forbid")

    region: str = "ap-guangzhou"
    """Region of both services (``AGS_REGION``, else ``TENCENTCLOUD_REGION``)."""
    secret_id: SecretStr | None = None
    """Tencent Cloud SecretId (``TENCENTCLOUD_SECRET_ID``)."""
    secret_key: SecretStr | None = None
    """Tencent Cloud SecretKey (``TENCENTCLOUD_SECRET_KEY``)."""
    session_token: SecretStr | None = None
    """STS token of temporary credentials (``TENCENTCLOUD_SESSION_TOKEN``)."""
    endpoint: str | None = None
    """``http(s)://host:port`` serving the Cloud APIs, e.g. the local emulator (``AGS_ENDPOINT``).
    Also used for TCR when ``tcr_endpoint`` is not set, since the emulator serves both."""
    tcr_endpoint: str | None = None
    """TCR Cloud API endpoint (``TCR_ENDPOINT``); default ``tcr.tencentcloudapi.com``."""
    internal: bool = False
    """Use the ``*.internal.tencentcloudapi.com`` endpoints (from inside Tencent Cloud)."""
    request_timeout: float = Field(default=60.0, gt=0)
    """Seconds before one Cloud API request is abandoned (and retried if that is safe)."""

    @model_validator(mode="before")
    @classmethod
    def _from_environment(cls, data: Any) -> Any:
        return fill_from_environment(data, cls.model_fields)

    @classmethod
    def from_env(cls, **given: Any) -> AgsConnection:
        """Values in ``given`` (``None`` means not given), the rest from the environment."""
        return cls(**given)

    def _credentials(self) -> tuple[SecretStr, SecretStr]:
        if self.secret_id is None or self.secret_key is None:
            raise ConfigError(
                "AGS tool management needs Tencent Cloud API credentials: set "
                "TENCENTCLOUD_SECRET_ID and TENCENTCLOUD_SECRET_KEY (an ark_ API key only "
                "works for starting sandboxes)"
            )
        return self.secret_id, self.secret_key

    def ags_client(self) -> AgsCloudClient:
        """A client of the AGS Cloud API."""
        from sandbox_runtime.backends.ags._cloud import INTERNAL_ENDPOINT, AgsCloudClient

        return self._client(AgsCloudClient, INTERNAL_ENDPOINT, self.endpoint)

    def tcr_client(self) -> TcrCloudClient:
        """A client of the TCR Cloud API (needs ``tencentcloud-sdk-python-tcr``)."""
        from .tcr import INTERNAL_ENDPOINT, TcrCloudClient

        return self._client(TcrCloudClient, INTERNAL_ENDPOINT, self.tcr_endpoint or self.endpoint)

    def _client(self, client_cls: type[_C], internal_endpoint: str, override: str | None) -> _C:
        """``client_cls`` for these credentials; ``override`` (the emulator) beats the defaults."""
        secret_id, secret_key = self._credentials()
        scheme, host = "https", internal_endpoint if self.internal else None
        if override:
            scheme, host = split_endpoint(override)
        return client_cls(
            secret_id=secret_id,
            secret_key=secret_key,
            session_token=self.session_token,
            region=self.region,
            endpoint=host,
            scheme=scheme,
            request_timeout=self.request_timeout,
        )
