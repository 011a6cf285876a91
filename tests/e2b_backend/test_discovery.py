"""Route discovery: from the answers of a service with and without e2b's checkpoint routes.

The two real services are the AGS emulator with its routes and without them (as an older
e2b); the router answers of other stacks (a plain-text 404, a 405) are built as httpx answers.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from pydantic import SecretStr

from sandbox_runtime.backend_kit.agent import E2bApi, discover, forget_discoveries
from sandbox_runtime.errors import BackendUnavailableError
from tests.conftest import bwrap_problem, require

try:
    from sandbox_runtime_emulators.ags.server import AgsEmulator
except ImportError:  # pragma: no cover
    require("needs the emulators: pip install -e ./emulators")

from sandbox_runtime._envd.e2b_features import route_answered

PROBE = "srt-probe-0123456789ab"


@pytest.fixture(autouse=True)
def _fresh_cache() -> Iterator[None]:
    forget_discoveries()
    yield
    forget_discoveries()


def _api(emulator: AgsEmulator) -> E2bApi:
    return E2bApi(emulator.url, SecretStr(emulator.api_key), request_timeout=10, service="e2b API")


@pytest.mark.parametrize("routes", [True, False])
def test_the_emulator_with_and_without_routes(routes: bool) -> None:
    require(bwrap_problem())
    with AgsEmulator(
        backend="local", local_isolation="namespace", e2b_checkpoint_routes=routes
    ) as emulator:
        found = discover(emulator.url, lambda: _api(emulator))
        assert (found.snapshots, found.fork, found.pause) == (routes, routes, routes)
        # Cached: a second call makes no client (and so asks nothing).
        assert discover(emulator.url + "/", lambda: pytest.fail("asked twice")) is found


def _answer(status: int, body: bytes, content_type: str = "application/json") -> httpx.Response:
    request = httpx.Request("POST", f"https://api.example/sandboxes/{PROBE}/fork")
    return httpx.Response(
        status, content=body, headers={"content-type": content_type}, request=request
    )


@pytest.mark.parametrize(
    ("status", "body", "answered"),
    [
        (404, b'{"code": 404, "message": "sandbox \\"%s\\" not found"}' % PROBE.encode(), True),
        (404, b'{"code": 404, "message": "Sandbox not found"}', True),
        (400, b'{"code": 400, "message": "count must be between 1 and 100"}', True),
        (409, b'{"code": 409, "message": "already paused"}', True),
        (404, b"404 page not found", False),  # Go's router, plain text
        (404, b'{"code": 404, "message": "no matching operation was found"}', False),
        (404, b'{"code": 404, "message": "no route for POST /x"}', False),
        (404, b"{}", False),
        (405, b'{"code": 405, "message": "method not allowed"}', False),
        (501, b"", False),
    ],
)
def test_a_route_is_told_from_a_router(status: int, body: bytes, answered: bool) -> None:
    assert route_answered(_answer(status, body), PROBE) is answered


@pytest.mark.parametrize("status", [401, 403, 500, 502, 503])
def test_a_refused_key_or_a_failing_service_is_an_error_not_an_answer(status: int) -> None:
    with pytest.raises(BackendUnavailableError):
        route_answered(_answer(status, b'{"message": "no"}'), PROBE)


def test_an_unreachable_service_is_not_cached() -> None:
    url = "http://127.0.0.1:9"  # discard port: nothing listens
    api = lambda: E2bApi(url, SecretStr("k"), request_timeout=2)  # noqa: E731
    for _ in range(2):
        with pytest.raises(BackendUnavailableError):
            discover(url, api)
