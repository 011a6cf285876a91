"""The environment variables AGS users already export, read in one place.

The ``ags`` backend's options and the tool-management connection (``manage``)
both fall back to these, so one set of exported variables serves training runs and tool
management alike.  Values given explicitly always win; variables are read, never written.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

__all__ = ["VARIABLES", "fill_from_environment"]

#: Option name -> the variable that supplies it when the option is not given.
VARIABLES = {
    "secret_id": "TENCENTCLOUD_SECRET_ID",
    "secret_key": "TENCENTCLOUD_SECRET_KEY",
    "session_token": "TENCENTCLOUD_SESSION_TOKEN",
    "api_key": "E2B_API_KEY",
    "region": "AGS_REGION",
    "tool_name": "AGS_TOOL_NAME",
    "tool_id": "AGS_TOOL_ID",
    "tool_mapping": "AGS_TOOL_MAPPING",
    "endpoint": "AGS_ENDPOINT",
    "domain": "E2B_DOMAIN",
    "tcr_endpoint": "TCR_ENDPOINT",
}
#: Read for ``region`` when ``AGS_REGION`` is not set (the Tencent Cloud CLI's variable).
_REGION_FALLBACK = "TENCENTCLOUD_REGION"


def fill_from_environment(data: Any, fields: Iterable[str]) -> Any:
    """``data`` (a model's raw input) with each of ``fields`` that is missing filled in.

    A ``None`` value counts as missing, so ``AgsOptions(region=None)`` means "the default or
    the environment", as an unset CLI flag does.  Non-dict input is returned unchanged for
    pydantic to reject.
    """
    if not isinstance(data, dict):
        return data
    filled = {key: value for key, value in data.items() if value is not None}
    for name in fields:
        variable = VARIABLES.get(name)
        if name not in filled and variable and os.environ.get(variable):
            filled[name] = os.environ[variable]
    if "region" in fields and "region" not in filled and os.environ.get(_REGION_FALLBACK):
        filled["region"] = os.environ[_REGION_FALLBACK]
    return filled
