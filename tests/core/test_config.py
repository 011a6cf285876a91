from __future__ import annotations

import pytest
from pydantic import ValidationError

from sandbox_runtime import ConfigError, SandboxConfig, SandboxRuntime
from sandbox_runtime._core.config import parse_duration, parse_memory


def test_defaults_are_usable() -> None:
    config = SandboxConfig()
    assert config.backend == "local"
    assert config.workdir == "/workspace"
    assert config.exec_timeout == 600.0


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("90", 90.0),
        ("90s", 90.0),
        ("30m", 1800.0),
        ("2h", 7200.0),
        ("1.5d", 129600.0),
        ("250ms", 0.25),
    ],
)
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds
    assert SandboxConfig(lifetime=text).lifetime == seconds


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("512m", 512 * 1024**2),
        ("2g", 2 * 1024**3),
        ("1Gi", 1024**3),
        ("1G", 1024**3),
        ("100MB", 100 * 1000**2),
        ("4096", 4096),
    ],
)
def test_memory_sizes(text: str, size: int) -> None:
    assert parse_memory(text) == size
    assert SandboxConfig(resources={"memory": text}).resources.memory == size


def test_unknown_field_is_named() -> None:
    with pytest.raises(ValidationError) as info:
        SandboxConfig(imgae="python:3.12")  # type: ignore[call-arg]
    assert info.value.errors()[0]["loc"] == ("imgae",)


@pytest.mark.parametrize(
    ("fields", "loc"),
    [
        ({"workdir": "relative/path"}, ("workdir",)),
        ({"lifetime": "forever"}, ("lifetime",)),
        ({"lifetime": -5}, ("lifetime",)),
        ({"exec_timeout": 0}, ("exec_timeout",)),
        ({"resources": {"memory": "12 parsecs"}}, ("resources", "memory")),
        ({"resources": {"cpus": -1}}, ("resources", "cpus")),
        ({"resources": {"gpus": 1}}, ("resources", "gpus")),
        ({"env": {"A=B": "x"}}, ("env",)),
        ({"max_output_bytes": 0}, ("max_output_bytes",)),
    ],
)
def test_bad_values_name_their_field(fields: dict[str, object], loc: tuple[str, ...]) -> None:
    with pytest.raises(ValidationError) as info:
        SandboxConfig(**fields)
    assert info.value.errors()[0]["loc"] == loc


def test_backend_options_are_validated_by_the_backend_model() -> None:
    with pytest.raises(ValidationError) as info:
        SandboxRuntime(backend="local", options={"isolaton": "namespace"})
    error = info.value.errors()[0]
    assert error["loc"] == ("options", "isolaton")
    assert error["type"] == "extra_forbidden"
    with pytest.raises(ValidationError) as info:
        SandboxRuntime(backend="local", options={"isolation": "vm"})
    assert info.value.errors()[0]["loc"] == ("options", "isolation")


def test_options_model_instance_of_another_backend_is_refused() -> None:
    from sandbox_runtime.backends.docker import DockerOptions

    with pytest.raises(ConfigError, match="LocalOptions"):
        SandboxRuntime(backend="local", options=DockerOptions())


def test_fields_override_a_given_config() -> None:
    runtime = SandboxRuntime(SandboxConfig(workdir="/a"), workdir="/b", env={"K": "v"})
    assert runtime.config.workdir == "/b"
    assert runtime.config.env == {"K": "v"}


def test_env_values_stay_out_of_repr() -> None:
    config = SandboxConfig(env={"OPENAI_API_KEY": "sk-very-secret-value"})
    assert "sk-very-secret-value" not in repr(config)
    assert "sk-very-secret-value" not in str(config)
    runtime = SandboxRuntime(config)
    assert "sk-very-secret-value" not in repr(runtime)


def test_plain_string_credentials_never_show_in_reprs_or_json() -> None:
    secret = "plain-secret-0123456789"
    config = SandboxConfig(
        backend="kubernetes",
        options={"token": secret, "namespace": "ns", "engine_options": {"api_key": secret}},
    )
    for text in (repr(config), str(config), config.model_dump_json()):
        assert secret not in text
        assert "**********" in text
        assert "'ns'" in text or '"ns"' in text
    # Inside the process the value is kept, so the backend receives it.
    assert config.model_dump()["options"]["token"] == secret
    assert config.options["token"] == secret  # type: ignore[index]
