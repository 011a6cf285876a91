"""The kubernetes backend shares one rate limiter per API server, paused by 429 Retry-After."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from sandbox_runtime import SandboxConfig, SandboxRuntime
from sandbox_runtime._core.ratelimit import limiter_for
from tests.conftest import DOCKER_IMAGE, kubernetes_problem, require

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def test_429_retry_after_pauses_every_call_to_the_server_and_nothing_fails() -> None:
    require(kubernetes_problem())
    from sandbox_runtime_emulators.kubernetes._http import parse_fault_spec
    from sandbox_runtime_emulators.kubernetes.server import KubernetesEmulator

    # 429 with Retry-After: 1 on a tenth of the requests: a hundred or so requests meet about
    # ten, and five in a row (which exhaust one call's retries, by design) almost never.
    faults = [parse_fault_spec("api:0.1:rate_limit")]
    with KubernetesEmulator(faults=faults, fault_seed=5) as emulator:
        options = emulator.backend_options(api_qps=20.0, api_burst=4)
        config = SandboxConfig(backend="kubernetes", image=DOCKER_IMAGE, options=options)
        from sandbox_runtime.backends.kubernetes._client import connect
        from sandbox_runtime.backends.kubernetes._options import KubernetesOptions

        server = connect(KubernetesOptions.model_validate(options)).server
        limiter = limiter_for(f"kubernetes:{server}", 20.0, 4)
        before = limiter.pauses

        def one(number: int) -> str:
            with SandboxRuntime(config) as sandbox:
                return sandbox.exec(f"echo {number}").stdout

        began = time.monotonic()
        with ThreadPoolExecutor(max_workers=4) as threads:
            outputs = list(threads.map(one, range(4)))
        elapsed = time.monotonic() - began
        assert outputs == [f"{n}\n" for n in range(4)]
        assert limiter.rate == 20.0
        assert limiter.pauses > before, "no 429 reached the limiter (change the seed)"
        # Each 429 holds every thread for its Retry-After of 1 s.
        assert elapsed >= 1.0


def test_the_emulator_refuses_a_client_over_its_quota_with_429_retry_after() -> None:
    """The API server's answer to a client over its share: a TooManyRequests Status."""
    require(kubernetes_problem())
    import httpx

    from sandbox_runtime_emulators._ratelimit import Quota
    from sandbox_runtime_emulators.kubernetes.server import KubernetesEmulator

    with KubernetesEmulator(tls=False, rate_limits={"*": Quota(1, 2)}) as emulator:
        assert emulator.token is not None
        headers = {"Authorization": f"Bearer {emulator.token.get_secret_value()}"}
        url = f"{emulator.url}/api/v1/namespaces/default/pods"
        answers = [httpx.get(url, headers=headers, timeout=10) for _ in range(4)]
        assert [a.status_code for a in answers[:2]] == [200, 200]
        refused = [a for a in answers if a.status_code == 429]
        assert refused, [a.status_code for a in answers]
        assert refused[0].headers["Retry-After"] == "1"
        status = refused[0].json()
        assert status["kind"] == "Status"
        assert status["status"] == "Failure"
        assert (status["reason"], status["code"]) == ("TooManyRequests", 429)
        assert status["details"] == {"retryAfterSeconds": 1}
        assert httpx.get(f"{emulator.url}/version", timeout=10).status_code == 200
        assert emulator.api_limits.refused == len(refused)


def test_sandboxes_through_a_quota_they_are_not_told_of_all_succeed() -> None:
    """The backend absorbs the emulator's 429s (no api_qps): every sandbox works."""
    require(kubernetes_problem())
    from sandbox_runtime_emulators._ratelimit import Quota
    from sandbox_runtime_emulators.kubernetes.server import KubernetesEmulator

    with KubernetesEmulator(rate_limits={"*": Quota(10, 4)}) as emulator:
        config = SandboxConfig(
            backend="kubernetes", image=DOCKER_IMAGE, options=emulator.backend_options()
        )

        def one(number: int) -> str:
            with SandboxRuntime(config) as sandbox:
                return sandbox.exec(f"echo {number}").stdout

        with ThreadPoolExecutor(max_workers=4) as threads:
            outputs = list(threads.map(one, range(4)))
        assert outputs == [f"{n}\n" for n in range(4)]
        assert emulator.api_limits.refused > 0, "the quota was never reached"
