"""The e2b backend's options, read from the environment the way e2b's SDK reads it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sandbox_runtime.backends.e2b._options import E2bOptions, load_template_mapping
from sandbox_runtime.errors import ConfigError

_VARIABLES = (
    "E2B_API_KEY",
    "E2B_DOMAIN",
    "E2B_API_URL",
    "E2B_SANDBOX_URL",
    "E2B_DEBUG",
    "E2B_TEMPLATE",
    "E2B_TEMPLATE_MAPPING",
)


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in _VARIABLES:
        monkeypatch.delenv(name, raising=False)


def test_defaults_are_the_sdks() -> None:
    opts = E2bOptions()
    assert opts.api_key is None
    assert opts.resolved_api_url == "https://api.e2b.app"
    assert opts.envd_url("sbx1", None) == "https://49983-sbx1.e2b.app"
    assert opts.template == "base"


def test_the_sdks_variables_are_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("E2B_API_KEY", "e2b_secret")
    monkeypatch.setenv("E2B_DOMAIN", "sandbox.example.org")
    monkeypatch.setenv("E2B_TEMPLATE", "swe-base")
    opts = E2bOptions()
    assert opts.api_key is not None
    assert opts.api_key.get_secret_value() == "e2b_secret"
    assert "e2b_secret" not in repr(opts)
    assert opts.resolved_api_url == "https://api.sandbox.example.org"
    assert opts.envd_url("sbx1", None) == "https://49983-sbx1.sandbox.example.org"
    assert opts.envd_url("sbx1", "other.example") == "https://49983-sbx1.other.example"
    assert opts.template == "swe-base"
    monkeypatch.setenv("E2B_API_URL", "http://127.0.0.1:8900/")
    monkeypatch.setenv("E2B_SANDBOX_URL", "http://127.0.0.1:8900")
    opts = E2bOptions()
    assert opts.resolved_api_url == "http://127.0.0.1:8900"
    assert opts.envd_url("sbx1", None) == "http://127.0.0.1:8900"


@pytest.mark.parametrize(("value", "debug"), [("true", True), ("TRUE", True), ("1", False)])
def test_debug_follows_the_sdks_rule(
    monkeypatch: pytest.MonkeyPatch, value: str, debug: bool
) -> None:
    monkeypatch.setenv("E2B_DEBUG", value)
    opts = E2bOptions()
    assert opts.debug is debug
    if debug:
        assert opts.resolved_api_url == "http://localhost:3000"
        assert opts.envd_url("sbx1", None) == "http://localhost:49983"


def test_given_options_win_over_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("E2B_DOMAIN", "from-env.example")
    monkeypatch.setenv("E2B_TEMPLATE", "from-env")
    opts = E2bOptions(domain="given.example", template="given")
    assert (opts.domain, opts.template) == ("given.example", "given")


def test_the_same_urls_as_the_installed_sdk(monkeypatch: pytest.MonkeyPatch) -> None:
    config_module = pytest.importorskip("e2b.connection_config")
    for env in ({"E2B_DOMAIN": "d.example"}, {"E2B_DEBUG": "true"}, {"E2B_API_URL": "http://h:1"}):
        for name in _VARIABLES:
            monkeypatch.delenv(name, raising=False)
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        sdk = config_module.ConnectionConfig()
        ours = E2bOptions()
        assert ours.resolved_api_url == sdk.api_url.rstrip("/"), env
        # The per-sandbox host (the SDK's "direct" URL); for e2b's own domains the SDK's
        # default is a shared host routed by header, which the direct one bypasses.
        direct = sdk.get_sandbox_direct_url("sbx1", sdk.domain)
        assert ours.envd_url("sbx1", sdk.domain) == direct, env


def test_a_template_mapping_is_checked(tmp_path: Path) -> None:
    good = tmp_path / "good.json"
    good.write_text(json.dumps({"python:3.12": "py312", "ghcr.io/x/y:1": "xy"}))
    assert load_template_mapping(good) == {"python:3.12": "py312", "ghcr.io/x/y:1": "xy"}
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"python:3.12": ""}))
    with pytest.raises(ConfigError, match=r"bad\.json: 'python:3\.12'"):
        load_template_mapping(bad)
    (tmp_path / "list.json").write_text("[]")
    with pytest.raises(ConfigError, match="JSON object"):
        load_template_mapping(tmp_path / "list.json")
    with pytest.raises(ConfigError, match="cannot read"):
        load_template_mapping(tmp_path / "missing.json")
