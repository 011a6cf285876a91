"""``sandbox-runtime ags tools|instances|sync|push`` with credentials from the environment,
human and ``--json`` output, exit codes, and no secret in anything printed."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from sandbox_runtime.cli import main as cli_main
from sandbox_runtime_emulators.ags.server import AgsEmulator
from tests.ags.test_tools import ROLE


@pytest.fixture
def ags_env(emulator: AgsEmulator, monkeypatch: pytest.MonkeyPatch) -> AgsEmulator:
    """Credentials and endpoint exported, as a user would; no ark_ key."""
    for name, value in emulator.environment().items():
        if not name.startswith("E2B_"):
            monkeypatch.setenv(name, value)
    monkeypatch.setenv("AGS_ROLE_ARN", ROLE)
    return emulator


class Cli:
    """Runs the command line in this process and keeps everything it printed."""

    def __init__(self, capsys: pytest.CaptureFixture[str]) -> None:
        self.capsys = capsys
        self.printed: list[str] = []

    def __call__(self, *argv: str, code: int = 0) -> str:
        returned = cli_main(["ags", *argv])
        out, err = self.capsys.readouterr()
        self.printed += [out, err]
        assert returned == code, f"exit {returned}, stderr: {err}"
        return out if code == 0 else err

    def json(self, *argv: str) -> Any:
        return json.loads(self(*argv, "--json"))


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Cli:
    return Cli(capsys)


def test_tools_and_instances_commands(
    ags_env: AgsEmulator, cli: Cli, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    created = cli.json(
        "tools", "create", "cli-tool", "--image", "org/app:1", "--tag", "k=v", "--port", "8000"
    )
    assert (created["name"], created["status"], created["tags"]) == (
        "cli-tool",
        "ACTIVE",
        {"k": "v"},
    )
    stored = ags_env.store.tool(tool_id=created["tool_id"])
    assert stored.role_arn == ROLE  # from AGS_ROLE_ARN
    assert stored.custom["Resources"] == {"CPU": "2000m", "Memory": "4Gi"}
    assert [p["Port"] for p in stored.custom["Ports"]] == [49983, 8000]
    assert "cli-tool" in cli("tools", "list")
    assert [t["name"] for t in cli.json("tools", "list", "--tag", "k=v")] == ["cli-tool"]
    assert cli.json("tools", "get", created["tool_id"])["name"] == "cli-tool"
    assert cli.json("tools", "wait", "cli-tool")["status"] == "ACTIVE"
    assert "invalid tool name" in cli("tools", "create", "no spaces", "--image", "x", code=2)
    assert "is taken" not in cli("tools", "create", "cli-tool", "--image", "x", code=1)

    started = cli.json("instances", "start", "--tool", "cli-tool", "--metadata", "purpose=debug")
    assert started["status"] == "RUNNING"
    assert started["metadata"] == {"purpose": "debug"}
    instance = started["instance_id"]
    assert instance in cli("instances", "list", "--status", "RUNNING")
    hidden = cli.json("instances", "token", instance)
    assert hidden["token"] == "**********"
    revealed = cli.json("instances", "token", instance, "--reveal")
    revealed_at = len(cli.printed) - 2  # the only output allowed to hold a secret
    assert ags_env.store.instance(instance).token_valid(revealed["token"])
    assert f"stopped {instance}" in cli("instances", "stop", instance)
    assert f"already stopped {instance}" in cli("instances", "stop", instance)
    assert "deleted cli-tool" in cli("tools", "delete", "cli-tool")
    assert "no sandbox tool" in cli("tools", "get", "cli-tool", code=1)

    printed = [text for index, text in enumerate(cli.printed) if index != revealed_at]
    everything = "\n".join(printed) + caplog.text
    for secret in (ags_env.secret_id, ags_env.secret_key, revealed["token"]):
        assert secret not in everything


def test_sync_and_push_dry_runs_and_a_real_sync(
    ags_env: AgsEmulator, cli: Cli, tmp_path: Path
) -> None:
    dataset = tmp_path / "tasks.jsonl"
    rows = [
        {"task_id": f"t{i}", "issue": "fix it", "sandbox": {"docker_image": image}}
        for i, image in enumerate(["org/one:1", "org/two:1", "org/one:1"])
    ]
    dataset.write_text("".join(json.dumps(row) + "\n" for row in rows))
    out = tmp_path / "mapping.json"
    plan = cli("sync", "--dataset", str(dataset), "--out", str(out), "--dry-run")
    assert "would create tool one-1 for org/one:1" in plan
    assert "2 image(s): 0 reused, 2 to create (dry run)" in plan
    assert not out.exists()

    report = cli.json(
        "sync", "--dataset", str(dataset), "--image", "org/three:1", "--out", str(out)
    )
    assert report["ok"] is True
    assert (report["images"], report["created"], report["active"]) == (3, 3, 3)
    assert sorted(json.loads(out.read_text())) == ["org/one:1", "org/three:1", "org/two:1"]
    again = cli("sync", "--dataset", str(dataset), "--out", str(out), "-j", "1")
    assert "2 image(s): 2 reused, 0 created, 2 ACTIVE" in again

    registry = ags_env.tcr.registry
    pushed = cli.json("push", "org/one:1", "--registry", f"tcr:{registry.registry_id}", "--dry-run")
    assert pushed == [
        {
            "source": "org/one:1",
            "target": f"{registry.domain}/org/one:1",
            "status": "planned",
            "digest": "",
            "error": "",
        }
    ]
    assert registry.namespaces == {}  # a dry run creates nothing
    assert "no image" in cli("push", "--registry", "r.io:5000", code=2)


def test_missing_credentials_are_named(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("TENCENTCLOUD_SECRET_ID", "TENCENTCLOUD_SECRET_KEY"):
        monkeypatch.delenv(name, raising=False)
    assert "TENCENTCLOUD_SECRET_ID" in cli("tools", "list", code=2)


def test_refused_credentials_fail_cleanly_without_leaking(
    ags_env: AgsEmulator, cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    wrong = "wrong-" + ags_env.secret_key
    monkeypatch.setenv("TENCENTCLOUD_SECRET_KEY", wrong)
    message = cli("tools", "list", code=1)
    assert "AuthFailure.SignatureFailure" in message
    assert wrong not in message
    assert ags_env.secret_id not in message
