"""Options of the ``e2b`` backend, read from the environment the way e2b's SDK reads it.

Every option may be given in ``SandboxConfig.options``; those left out come from the SDK's
variables (e2b 2.63, ``e2b/connection_config.py``), so a machine set up for the SDK needs
nothing more: ``E2B_API_KEY``, ``E2B_DOMAIN`` (default ``e2b.app``), ``E2B_API_URL``
(default ``https://api.<domain>``, or ``http://localhost:3000`` under ``E2B_DEBUG=true``),
``E2B_SANDBOX_URL`` (one envd URL for every sandbox; default ``https://49983-<id>.<domain>``,
the SDK's "direct" URL, or ``http://localhost:49983`` under ``E2B_DEBUG``; for e2b's own
domains the SDK's default is a shared host routed by header instead), ``E2B_DEBUG``.
Two are this library's: ``E2B_TEMPLATE`` (the template sandboxes start from) and
``E2B_TEMPLATE_MAPPING`` (an image -> template file for SWE rows).  Variables are read,
never written.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from pydantic import Field, SecretStr, model_validator

from sandbox_runtime.backend_kit import BackendOptions, default_checkpoint_root, limiter_for
from sandbox_runtime.backend_kit.agent import ENVD_PORT, E2bApi
from sandbox_runtime.errors import ConfigError

__all__ = ["VARIABLES", "E2bOptions", "control_plane", "load_template_mapping"]

#: Option name -> the variable that supplies it when the option is not given.
VARIABLES = {
    "api_key": "E2B_API_KEY",
    "domain": "E2B_DOMAIN",
    "api_url": "E2B_API_URL",
    "sandbox_url": "E2B_SANDBOX_URL",
    "debug": "E2B_DEBUG",
    "template": "E2B_TEMPLATE",
    "template_mapping": "E2B_TEMPLATE_MAPPING",
}


class E2bOptions(BackendOptions):
    """Options of the ``e2b`` backend (``docs/e2b.md``)."""

    api_key: SecretStr | None = None
    """The service's API key (default ``E2B_API_KEY``)."""
    domain: str = "e2b.app"
    """The service's domain (default ``E2B_DOMAIN``, else e2b's own)."""
    api_url: str | None = None
    """The control plane's URL (default ``E2B_API_URL``, else derived from the domain)."""
    sandbox_url: str | None = None
    """One envd URL for every sandbox (default ``E2B_SANDBOX_URL``, else per-sandbox hosts)."""
    debug: bool = False
    """e2b's debug mode (default ``E2B_DEBUG``): everything on ``localhost``, over http."""
    template: str = "base"
    """The template (name or id) sandboxes start from (default ``E2B_TEMPLATE``, else
    ``base``, the SDK's default)."""
    template_mapping: Path | None = None
    """A JSON file ``{"<image>": "<template>"}`` (default ``E2B_TEMPLATE_MAPPING``): a sandbox
    whose ``SandboxConfig.image`` is in it starts from that template; an image not in it is
    an error (a template is an image on e2b: the image cannot be swapped at start)."""
    request_timeout: float = Field(default=60.0, gt=0)
    """Seconds before one control-plane or data-plane request is abandoned."""
    api_qps: float | None = Field(default=None, gt=0)
    """Control-plane requests per second this process sends, shared by its sandboxes."""
    api_burst: int | None = Field(default=None, ge=1)
    """Control-plane requests allowed at once above ``api_qps``."""
    checkpoint_dir: Path | None = None
    """This client's checkpoint directory: the records of snapshot checkpoints (their labels,
    owner and expiry: e2b snapshots carry no metadata) and, on a service without snapshot
    routes, the archives of the fallback; default ``SANDBOX_RUNTIME_CHECKPOINT_DIR``, else
    ``$XDG_STATE_HOME/sandbox-runtime/checkpoints`` (the archive store's)."""

    @model_validator(mode="before")
    @classmethod
    def _from_environment(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        filled = {key: value for key, value in data.items() if value is not None}
        for name, variable in VARIABLES.items():
            if name not in filled and os.environ.get(variable):
                filled[name] = os.environ[variable]
        if isinstance(filled.get("debug"), str):
            # The SDK's rule: only "true" (any case) turns debug on.
            filled["debug"] = filled["debug"].lower() == "true"
        return filled

    @property
    def resolved_api_url(self) -> str:
        """The control plane's URL, as the SDK derives it."""
        if self.api_url:
            return self.api_url.rstrip("/")
        return "http://localhost:3000" if self.debug else f"https://api.{self.domain}"

    def envd_url(self, sandbox_id: str, domain: str | None) -> str:
        """One sandbox's envd URL, as the SDK derives it (a create may name its domain)."""
        if self.sandbox_url:
            return self.sandbox_url.rstrip("/")
        if self.debug:
            return f"http://localhost:{ENVD_PORT}"
        return f"https://{ENVD_PORT}-{sandbox_id}.{domain or self.domain}"

    @property
    def resolved_checkpoint_dir(self) -> Path:
        """The checkpoint records' directory."""
        return default_checkpoint_root(self.checkpoint_dir)


def control_plane(opts: E2bOptions) -> E2bApi:
    """A control-plane client for these options (``ConfigError`` without an API key)."""
    if opts.api_key is None:
        raise ConfigError("the e2b backend needs an API key: set E2B_API_KEY")
    url = opts.resolved_api_url
    return E2bApi(
        url,
        opts.api_key,
        request_timeout=opts.request_timeout,
        limiter=limiter_for(f"e2b:{url}", opts.api_qps, opts.api_burst),
        service="e2b API",
    )


def load_template_mapping(path: Path) -> dict[str, str]:
    """The image -> template file, checked: a bad entry is an error naming file and key."""
    try:
        data = json.loads(path.read_text())
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the template mapping ({exc})") from exc
    except ValueError as exc:
        raise ConfigError(f"{path}: not JSON ({exc})") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a template mapping is a JSON object image -> template")
    for image, template in data.items():
        if not isinstance(template, str) or not template:
            raise ConfigError(f"{path}: {image!r}: the template must be a non-empty string")
    return {str(image): str(template) for image, template in data.items()}
