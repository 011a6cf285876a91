"""The unmodified tencentcloud SDK pointed at an AGS emulator: one client and request builder."""

from __future__ import annotations

import json

from tencentcloud.ags.v20250920 import ags_client
from tencentcloud.common import credential
from tencentcloud.common.profile.client_profile import ClientProfile
from tencentcloud.common.profile.http_profile import HttpProfile

from sandbox_runtime_emulators.ags.server import AgsEmulator


def sdk_client(emulator: AgsEmulator) -> ags_client.AgsClient:
    """The SDK's own client, over plain HTTP to the emulator, with its credentials."""
    endpoint = emulator.url.removeprefix("http://")
    profile = ClientProfile(httpProfile=HttpProfile(protocol="http", endpoint=endpoint))
    cred = credential.Credential(emulator.secret_id, emulator.secret_key)
    return ags_client.AgsClient(cred, "ap-guangzhou", profile)


def sdk_request(model: type, **fields: object) -> object:
    """A request model filled the way the SDK reads JSON (its own field names)."""
    request = model()
    request.from_json_string(json.dumps(fields))
    return request
