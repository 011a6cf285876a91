"""The ``spread`` backend: placement over members, quota refusals, reaping and accounting.

Members are real engines: local sandboxes, the local Docker engine, and the AGS emulator
(whose refusals and quota are the Cloud API's).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from sandbox_runtime import (
    QuotaExceededError,
    SandboxConfig,
    SandboxGoneError,
    SandboxRuntime,
    list_sandboxes,
)
from sandbox_runtime.backend_kit import Capability
from sandbox_runtime.backends.spread import SpreadBackend, SpreadOptions
from sandbox_runtime.backends.spread._ledger import REFUSAL_PAUSE
from sandbox_runtime.cli._args import backend_options
from sandbox_runtime.errors import ConfigError
from tests.conftest import docker_problem, require


def _local(name: str, base: Path, **limits: Any) -> dict[str, Any]:
    return {"backend": "local", "name": name, "options": {"base_dir": str(base / name)}, **limits}


def _counts(options: dict[str, Any]) -> dict[str, tuple[int, int, int, int]]:
    """Per member: (started, refused, failed, live)."""
    found = SpreadBackend.accounting(SpreadOptions.model_validate(options))
    return {c.member: (c.started, c.refused, c.failed, c.live) for c in found}


# -- options ---------------------------------------------------------------------------------


def test_a_bad_member_is_an_error_naming_its_position_and_field(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match=r"members\.1\.max_live"):
        SpreadOptions.model_validate(
            {"members": [_local("a", tmp_path), _local("b", tmp_path, max_live=0)]}
        )
    with pytest.raises(ValidationError, match=r"members\.0\n.*options\.isolation"):
        SpreadOptions.model_validate(
            {"members": [{"backend": "local", "options": {"isolation": "bogus"}}]}
        )
    with pytest.raises(ValidationError, match="'local' is used twice"):
        SpreadOptions.model_validate({"members": [{"backend": "local"}, {"backend": "local"}]})
    with pytest.raises(ValidationError, match="at least one member"):
        SpreadOptions.model_validate({})
    with pytest.raises(ConfigError, match=r"^--backend-option: members\.0\.nme: Extra inputs"):
        backend_options("spread", ['members=[{"backend": "local", "nme": "x"}]'])


def test_members_come_from_the_command_line_or_a_json_or_toml_file(tmp_path: Path) -> None:
    members = [_local("a", tmp_path, max_live=2), _local("b", tmp_path)]
    given = backend_options("spread", [f"members={json.dumps(members)}"])
    assert [m.label for m in SpreadOptions.model_validate(given).members] == ["a", "b"]
    as_json = tmp_path / "members.json"
    as_json.write_text(json.dumps(members))
    as_toml = tmp_path / "members.toml"
    as_toml.write_text(
        "[[members]]\nbackend = 'local'\nname = 'a'\nmax_live = 2\n"
        "[[members]]\nbackend = 'local'\nname = 'b'\nstarts_per_second = 5.0\nburst = 2\n"
    )
    for path in (as_json, as_toml):
        loaded = SpreadOptions.model_validate({"members_file": str(path)}).members
        assert [(m.label, m.max_live) for m in loaded] == [("a", 2), ("b", None)]
    bad = tmp_path / "bad.toml"
    bad.write_text("[[members]]\nbackend = 'local'\nburst = 0\n")
    with pytest.raises(ValidationError, match=r"burst"):
        SpreadOptions.model_validate({"members_file": str(bad)})


def test_capabilities_are_what_every_member_can_do() -> None:
    require(docker_problem())
    both = {"members": [{"backend": "local"}, {"backend": "docker"}]}
    found = SpreadBackend.capabilities_for(SpreadOptions.model_validate(both))
    from sandbox_runtime.backend_kit import load_backend

    local_caps = load_backend("local").capabilities
    docker_caps = load_backend("docker").capabilities
    # Engine images where any member runs them: placement routes by what a member can run.
    assert Capability.ENGINE_IMAGES in found
    assert Capability.DIRECTORY_IMAGES not in found  # local's alone
    assert found - {Capability.ENGINE_IMAGES} <= local_caps & docker_caps
    assert Capability.CHECKPOINT_FILESYSTEM not in found  # not delegated (docstring)


# -- placement ------------------------------------------------------------------------------


def test_a_full_member_sends_the_next_sandbox_to_the_next_member(tmp_path: Path) -> None:
    options = {"members": [_local("a", tmp_path, max_live=2), _local("b", tmp_path)]}
    opened = [SandboxRuntime(backend="spread", options=options).start() for _ in range(3)]
    try:
        assert [s.id.split(":")[0] for s in opened] == ["a", "a", "b"]
        assert all(s.exec("echo ok").stdout == "ok\n" for s in opened)
        assert _counts(options) == {"a": (2, 0, 0, 2), "b": (1, 0, 0, 1)}
        opened.pop(0).close()  # a frees a slot: the next goes to a again
        opened.append(SandboxRuntime(backend="spread", options=options).start())
        assert opened[-1].id.startswith("a:")
    finally:
        for sandbox in opened:
            sandbox.close()
    assert _counts(options) == {"a": (3, 0, 0, 0), "b": (1, 0, 0, 0)}


def test_with_every_member_full_a_start_waits_then_fails_typed(tmp_path: Path) -> None:
    options = {"members": [_local("a", tmp_path, max_live=1)]}
    with SandboxRuntime(backend="spread", options=options):
        waiting = SandboxRuntime(backend="spread", options=options, start_timeout=0.5)
        with pytest.raises(QuotaExceededError, match=r"a: 1 live of 1"):
            waiting.start()
        waiting.close()


def test_not_waiting_says_so_and_fails_at_once(tmp_path: Path) -> None:
    options = {"members": [_local("a", tmp_path, max_live=1)], "wait_for_capacity": False}
    with SandboxRuntime(backend="spread", options=options):
        waiting = SandboxRuntime(backend="spread", options=options, start_timeout=120)
        began = time.monotonic()
        with pytest.raises(QuotaExceededError, match=r"at once \(wait_for_capacity is false\)"):
            waiting.start()
        assert time.monotonic() - began < 5
        waiting.close()


def test_a_member_that_cannot_run_the_image_is_passed_over(
    tmp_path: Path, docker_image: str
) -> None:
    """Once sent to local, which cannot run a container image: an error in 0.6 s, the work
    lost.  Now placed on the member that can run it, or refused in one line if none can."""
    require(docker_problem())
    options = {"members": [_local("a", tmp_path), {"backend": "docker"}]}
    with SandboxRuntime(backend="spread", image=docker_image, options=options) as sandbox:
        assert sandbox.id.startswith("docker:")
    only_local = {"members": [_local("a", tmp_path), _local("b", tmp_path)]}
    refused = SandboxRuntime(backend="spread", image=docker_image, options=only_local)
    with pytest.raises(ConfigError, match=r"no spread member can run image .*a: local backend"):
        refused.start()
    refused.close()


def test_a_start_quota_spaces_starts_on_a_member(tmp_path: Path) -> None:
    options = {"members": [_local("a", tmp_path, starts_per_second=4.0, burst=1)]}
    began = time.monotonic()
    opened = [SandboxRuntime(backend="spread", options=options).start() for _ in range(3)]
    elapsed = time.monotonic() - began
    for sandbox in opened:
        sandbox.close()
    assert elapsed >= 0.45, elapsed  # 3 starts at 4/s with a burst of 1: two waits of 0.25 s


def test_a_member_holding_the_image_goes_first(tmp_path: Path, docker_image: str) -> None:
    require(docker_problem())
    options = {"members": [_local("a", tmp_path), {"backend": "docker"}]}
    with SandboxRuntime(
        backend="spread", image=docker_image, lifetime=300, options=options
    ) as sandbox:
        assert sandbox.id.startswith("docker:")
        assert "bookworm" in sandbox.exec("cat /etc/os-release").stdout


# -- finding sandboxes again ------------------------------------------------------------------


def test_connect_takes_member_ids_and_refuses_others(tmp_path: Path) -> None:
    options = {"members": [_local("a", tmp_path, max_live=1), _local("b", tmp_path)]}
    with (
        SandboxRuntime(backend="spread", options=options) as first,
        SandboxRuntime(backend="spread", options=options) as second,
    ):
        found = list_sandboxes("spread", options=options)
        assert {first.id, second.id} <= {info.sandbox_id for info in found}
        assert {info.backend for info in found} == {"spread"}
    with pytest.raises(SandboxGoneError, match="MEMBER:ID"):
        SandboxRuntime.connect("spread", "nobody:123", options=options)


_OWNER = textwrap.dedent(
    """
    import json, sys, time
    from sandbox_runtime import SandboxRuntime
    options = json.loads(sys.argv[1])
    ids = [SandboxRuntime(backend="spread", image=sys.argv[2], lifetime=600,
                          options=options).start().id for _ in range(2)]
    print(json.dumps(ids), flush=True)
    time.sleep(600)
    """
)


def _ids_left_by_killed_owner(script: str, options: dict[str, Any], image: str) -> list[str]:
    """Run ``script`` as an owner process, read the ids it started, then SIGKILL it."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    owner = subprocess.Popen(
        [sys.executable, "-c", script, json.dumps(options), image],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert owner.stdout is not None
        ids: list[str] = json.loads(owner.stdout.readline())
    finally:
        owner.send_signal(signal.SIGKILL)
        owner.wait(timeout=30)
    return ids


def test_reap_finds_every_members_sandboxes_after_the_owner_is_killed(
    tmp_path: Path, docker_image: str
) -> None:
    require(docker_problem())
    options = {
        "members": [
            {"backend": "docker", "max_live": 1},
            {**_local("a", tmp_path), "image": ""},
        ]
    }
    ids = _ids_left_by_killed_owner(_OWNER, options, docker_image)
    assert [i.split(":")[0] for i in ids] == ["docker", "a"]
    reaped = SpreadBackend.reap(SpreadOptions.model_validate(options))
    assert set(ids) <= {item.sandbox_id for item in reaped}
    assert all(item.backend == "spread" for item in reaped)
    left = {info.sandbox_id for info in list_sandboxes("spread", options=options)}
    assert not left & set(ids)


# -- the AGS emulator: quota refusals and the quota it reports ---------------------------------


@pytest.fixture(scope="module")
def ags() -> Any:
    """An AGS emulator whose instances are local sandboxes, with an instance quota of 2."""
    pytest.importorskip("tencentcloud.ags")
    from sandbox_runtime_emulators.ags._service import ServiceLimits
    from sandbox_runtime_emulators.ags.server import AgsEmulator

    with AgsEmulator(backend="local", limits=ServiceLimits(max_instances=2)) as running:
        yield running


def _ags_member(ags: Any, **limits: Any) -> dict[str, Any]:
    return {"backend": "ags", "options": ags.backend_options(), **limits}


def test_the_emulator_reports_its_configured_quota_to_the_unmodified_sdk(ags: Any) -> None:
    from tencentcloud.ags.v20250920 import ags_client, models
    from tencentcloud.common import credential
    from tencentcloud.common.profile.client_profile import ClientProfile
    from tencentcloud.common.profile.http_profile import HttpProfile

    profile = ClientProfile(httpProfile=HttpProfile(protocol="http", endpoint=ags.url[7:]))
    client = ags_client.AgsClient(
        credential.Credential(ags.secret_id, ags.secret_key), "ap-guangzhou", profile
    )
    answer = client.DescribeQuotaOverview(models.DescribeQuotaOverviewRequest())
    overview = answer.AccountQuotaOverview
    assert overview.Quota.SandboxInstances == 2 == ags.service.limits.max_instances
    assert overview.Usage.SandboxInstances == 0
    assert answer.TotalCount == 0
    assert answer.QuotaGroupSet == []
    assert answer.DataTime.endswith("Z")
    assert answer.RequestId


def test_a_quota_refusal_moves_the_sandbox_to_the_next_member(ags: Any, tmp_path: Path) -> None:
    options = {"members": [_ags_member(ags, max_live=5), _local("b", tmp_path)]}
    # More refusals than the ags backend's retry budget (6 attempts): it gives up, typed.
    ags.faults.inject("rate_limit", plane="cloud", operation="StartSandboxInstance", times=6)
    try:
        with SandboxRuntime(backend="spread", workdir="/testbed", options=options) as sandbox:
            assert sandbox.id.startswith("b:")
        assert _counts(options)["ags"][:3] == (0, 1, 0)
        refusal = SpreadBackend.accounting(SpreadOptions.model_validate(options))[0].last_refusal
        assert "RequestLimitExceeded" in refusal
        time.sleep(REFUSAL_PAUSE)  # a refusing member is passed over for one quota window
        with SandboxRuntime(backend="spread", workdir="/testbed", options=options) as sandbox:
            assert sandbox.id.startswith("ags:")  # the next one is taken again
    finally:
        ags.faults.clear()


def test_the_ags_quota_the_service_reports_caps_the_member(ags: Any, tmp_path: Path) -> None:
    options = {"members": [_ags_member(ags, name="ags-q"), _local("c", tmp_path)]}
    opened = [
        SandboxRuntime(backend="spread", workdir="/testbed", options=options).start()
        for _ in range(3)
    ]
    try:
        assert [s.id.split(":")[0] for s in opened] == ["ags-q", "ags-q", "c"]
        assert _counts(options)["ags-q"] == (2, 0, 0, 2)  # nothing refused: the cap was known
    finally:
        for sandbox in opened:
            sandbox.close()


def test_ags_raises_quota_exceeded_at_its_instance_quota(ags: Any) -> None:
    config = SandboxConfig(backend="ags", workdir="/testbed", options=ags.backend_options())
    third = SandboxRuntime(config)
    with (
        SandboxRuntime(config),
        SandboxRuntime(config),
        pytest.raises(QuotaExceededError, match=r"LimitExceeded\.SandboxInstance"),
    ):
        third.start()


def test_spread_keeps_under_the_emulators_start_quota(tmp_path: Path) -> None:
    """At 5 starts/s on the member, the emulator's own 5/s quota refuses nothing."""
    pytest.importorskip("tencentcloud.ags")
    from concurrent.futures import ThreadPoolExecutor

    from sandbox_runtime_emulators._ratelimit import Quota
    from sandbox_runtime_emulators.ags.server import AgsEmulator

    quota = {"StartSandboxInstance": Quota(5)}
    with AgsEmulator(backend="local", rate_limits=quota) as emulator:
        member = {"backend": "ags", "name": "ags5", "options": emulator.backend_options()}
        # Burst 1: a bucket admits burst + rate in a second, the windowed quota only rate.
        options = {"members": [{**member, "starts_per_second": 5.0}]}

        def start_one(_: int) -> str:
            with SandboxRuntime(backend="spread", workdir="/testbed", options=options) as sb:
                return sb.id

        with ThreadPoolExecutor(max_workers=10) as pool:
            ids = list(pool.map(start_one, range(10)))
        starts = emulator.faults.requests("cloud", "StartSandboxInstance")
    assert len(set(ids)) == 10
    assert all(sandbox_id.startswith("ags5:") for sandbox_id in ids)
    assert [r.fault for r in starts] == [None] * 10, "the quota refused a start"
    assert _counts(options)["ags5"][:3] == (10, 0, 0)


def _plain(options: dict[str, Any]) -> dict[str, Any]:
    """Options with secrets as text, for a child process's command line."""
    from pydantic import SecretStr

    return {k: v.get_secret_value() if isinstance(v, SecretStr) else v for k, v in options.items()}


def test_reap_after_kill_9_over_both_emulators_and_docker(
    ags: Any, k8s_emulator: Any, docker_image: str
) -> None:
    """One sandbox on each of ags, kubernetes and docker; the owner dies; reap finds all."""
    require(docker_problem())
    options = {
        "members": [
            {**_ags_member(ags, max_live=1, image=""), "options": _plain(ags.backend_options())},
            {
                "backend": "kubernetes",
                "options": _plain(k8s_emulator.backend_options()),
                "max_live": 1,
            },
            {"backend": "docker", "max_live": 1},
        ]
    }
    script = _OWNER.replace("range(2)", "range(3)")
    ids = _ids_left_by_killed_owner(script, options, docker_image)
    # Docker first: it holds the image (affinity); then the others in order.
    assert [i.split(":")[0] for i in ids] == ["docker", "ags", "kubernetes"]
    listed = {info.sandbox_id for info in list_sandboxes("spread", options=options)}
    assert set(ids) <= listed
    reaped = {item.sandbox_id for item in SpreadBackend.reap(SpreadOptions.model_validate(options))}
    assert set(ids) <= reaped
    left = {info.sandbox_id for info in list_sandboxes("spread", options=options)}
    assert not left & set(ids)


def test_the_swe_runner_runs_bundled_tasks_spread_from_the_command_line(tmp_path: Path) -> None:
    """``run --backend spread`` with members: every task graded, each on a member."""
    members = [_local("a", tmp_path, max_live=1), _local("b", tmp_path)]
    report = tmp_path / "report.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "sandbox_runtime.cli",
            "run",
            "bundled",
            "--agent",
            "oracle",
            "--backend",
            "spread",
            "--backend-option",
            f"members={json.dumps(members)}",
            "-j",
            "2",
            "--limit",
            "3",
            "--report",
            str(report),
            "--quiet",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    results = json.loads(report.read_text())["tasks"]
    assert [r["reward"] for r in results] == [1.0, 1.0, 1.0]
    assert all(r.get("error") is None for r in results)
    bad = subprocess.run(
        [sys.executable, "-m", "sandbox_runtime.cli", "run", "bundled", "--backend", "spread",
         "--backend-option", 'members=[{"backend": "local", "max_live": 0}]'],
        env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert bad.returncode == 2
    assert "members.0.max_live" in bad.stderr.strip().splitlines()[-1]


def test_bundled_tasks_over_docker_and_local_all_run_where_they_can(tmp_path: Path) -> None:
    """docker (max 2) and local: the samples' container images run on docker only (once 8
    of 10 went to local and failed there)."""
    require(docker_problem())
    members = [{"backend": "docker", "max_live": 2}, _local("a", tmp_path)]
    report = tmp_path / "report.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(
        [sys.executable, "-m", "sandbox_runtime.cli", "run", "bundled", "--agent", "oracle",
         "--backend", "spread", "--backend-option", f"members={json.dumps(members)}",
         "-j", "2", "--limit", "4", "--report", str(report), "--quiet"],
        env=env, capture_output=True, text=True, timeout=400, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    results = json.loads(report.read_text())["tasks"]
    assert [r["reward"] for r in results] == [1.0] * 4
    assert _counts({"members": members})["a"][:3] == (0, 0, 0)  # local started nothing
