from __future__ import annotations

import importlib
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest

from sandbox_runtime import BackendNotFoundError, SandboxRuntime, list_backends, load_backend
from sandbox_runtime._core import registry
from sandbox_runtime._core.plugins import Registry
from sandbox_runtime.backend_kit import Backend
from sandbox_runtime.backends.local import LocalBackend

FIXTURE = Path(__file__).parent.parent / "fixtures" / "thirdparty-backend"


def test_builtins_are_registered_through_entry_points() -> None:
    infos = {info.name: info for info in list_backends()}
    assert infos["local"].target == "sandbox_runtime.backends.local:LocalBackend"
    assert infos["docker"].distribution == "sandbox-runtime-swe"
    assert load_backend("local") is LocalBackend


def test_the_built_in_table_and_the_entry_points_list_the_same_backends() -> None:
    """The built-ins are listed twice (a table for source trees, entry points for tools)."""
    tomllib = pytest.importorskip("tomllib", reason="Python 3.11+ reads pyproject.toml")
    from sandbox_runtime._core import registry

    project = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())
    declared = project["project"]["entry-points"]["sandbox_runtime.backends"]
    table = {name: target for name, (target, _extra) in registry._BUILT_INS.items()}
    assert declared == table
    on_disk = {
        package.name
        for package in (Path(registry.__file__).parents[1] / "backends").iterdir()
        if (package / "__init__.py").is_file()
    }
    assert set(table) == on_disk


def test_unknown_name_lists_installed_backends() -> None:
    with pytest.raises(BackendNotFoundError) as info:
        load_backend("dokcer")
    message = str(info.value)
    assert "'dokcer'" in message
    assert "known: " in message
    assert "docker" in message
    assert "local" in message


def test_known_but_missing_backend_names_its_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    from sandbox_runtime import BackendUnavailableError
    from sandbox_runtime._core import registry

    monkeypatch.setitem(registry.BACKENDS.built_ins, "ags", "no_such_module_for_ags:AgsBackend")
    monkeypatch.setattr(registry.BACKENDS, "entry_points", lambda: {})
    registry.BACKENDS.clear_cache()
    with pytest.raises(BackendUnavailableError, match=r"pip install 'sandbox-runtime-swe\[ags\]'"):
        load_backend("ags")


def test_built_ins_are_found_without_installed_metadata(tmp_path: Path) -> None:
    """A source tree on the path, no distribution installed: the built-in table still works."""
    # Only the core's third-party imports beside src/, linked in, and no site-packages at all.
    deps = tmp_path / "deps"
    deps.mkdir()
    for name in (
        "pydantic",
        "pydantic_core",
        "typing_extensions",
        "annotated_types",
        "typing_inspection",
    ):
        module = importlib.import_module(name)
        origin = Path(module.__file__ or "")
        source = origin.parent if origin.name == "__init__.py" else origin
        (deps / source.name).symlink_to(source)
    # A copy of the package alone: src/ may hold an editable install's egg-info.
    src = tmp_path / "src"
    package = Path(__file__).resolve().parents[2] / "src" / "sandbox_runtime"
    shutil.copytree(package, src / "sandbox_runtime", ignore=shutil.ignore_patterns("bundled"))
    script = (
        "import importlib.metadata as m, sandbox_runtime as s;"
        "assert not list(m.entry_points(group='sandbox_runtime.backends'));"
        "print(sorted(i.name for i in s.list_backends()));"
        "print(s.load_backend('local').__name__);"
        "print(s.list_backends()[0].distribution)"
    )
    result = subprocess.run(
        [sys.executable, "-S", "-c", script],
        env={"PYTHONPATH": f"{src}:{deps}"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "['ags', 'docker', 'e2b', 'kubernetes', 'local', 'repoenv', 'spread']",
        "LocalBackend",
        "None",
    ]


class _BrokenEntryPoint:
    dist = None
    value = "broken:Backend"

    def __init__(self, message: str) -> None:
        self.message = message

    def load(self) -> object:
        raise ImportError(self.message)


@pytest.mark.parametrize(
    "import_error",
    [
        "No module named 'docker'",
        "the docker backend needs docker-py: pip install 'sandbox-runtime-swe[docker]'",
    ],
)
def test_backend_whose_dependencies_are_missing_names_its_extra_once(
    monkeypatch: pytest.MonkeyPatch, import_error: str
) -> None:
    from sandbox_runtime import BackendUnavailableError
    from sandbox_runtime._core import registry

    monkeypatch.setattr(
        registry.BACKENDS, "entry_points", lambda: {"docker": _BrokenEntryPoint(import_error)}
    )
    registry.BACKENDS.clear_cache()
    with pytest.raises(BackendUnavailableError) as info:
        load_backend("docker")
    message = str(info.value)
    assert import_error in message
    assert message.count("pip install 'sandbox-runtime-swe[docker]'") == 1


def test_dotted_path_loads_a_backend_class() -> None:
    assert load_backend("sandbox_runtime.backends.local:LocalBackend") is LocalBackend
    with pytest.raises(BackendNotFoundError, match="no 'Nope'"):
        load_backend("sandbox_runtime.backends.local:Nope")
    with pytest.raises(BackendNotFoundError, match="Backend subclass"):
        load_backend("sandbox_runtime._core.config:SandboxConfig")


@pytest.fixture(scope="module")
def thirdparty_installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Install the fixture distribution into a directory put on sys.path, as pip --target does."""
    target = tmp_path_factory.mktemp("site")
    command = [
        sys.executable,
        "-m",
        "pip",
        "install",
        "--quiet",
        "--no-deps",
        "--target",
        str(target),
    ]
    # Without build isolation when the local setuptools can build wheels (fast, offline);
    # otherwise pip fetches a build backend from the index.
    offline = subprocess.run(
        [*command, "--no-build-isolation", str(FIXTURE)], capture_output=True, check=False
    )
    if offline.returncode != 0:
        subprocess.run([*command, str(FIXTURE)], check=True)
    sys.path.insert(0, str(target))
    importlib.invalidate_caches()
    yield target
    sys.path.remove(str(target))
    sys.modules.pop("srt_thirdparty_backend", None)


def test_third_party_distribution_adds_a_backend_by_entry_point(thirdparty_installed: Path) -> None:
    infos = {info.name: info for info in list_backends()}
    assert infos["tempdir"].distribution == "srt-thirdparty-backend"
    backend_cls = load_backend("tempdir")
    assert issubclass(backend_cls, Backend)
    with SandboxRuntime(backend="tempdir", workdir="/work") as sandbox:
        sandbox.write_text("hello.txt", "from a third party\n")
        assert sandbox.exec("cat hello.txt").stdout == "from a third party\n"
        assert sandbox.read_text("hello.txt") == "from a third party\n"
        assert sandbox.exec("exit 4").exit_code == 4
        root = sandbox.id
        assert Path(root).is_dir()
    assert not Path(root).exists()


def test_concurrent_first_loads_scan_the_installed_distributions_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """16 sandboxes starting at once in a fresh process: one entry-point scan, not 16."""
    scans: list[str] = []
    real = Registry.entry_points

    def slow_scan(self: Registry[type[Backend[Any]]]) -> dict[str, metadata.EntryPoint]:
        scans.append(threading.current_thread().name)
        time.sleep(0.05)  # a training venv's hundreds of distributions
        return real(self)

    monkeypatch.setattr(Registry, "entry_points", slow_scan)
    registry.BACKENDS.clear_cache()
    try:
        with ThreadPoolExecutor(16) as pool:
            loaded = set(pool.map(lambda _: load_backend("local"), range(16)))
    finally:
        registry.BACKENDS.clear_cache()
    assert loaded == {LocalBackend}
    assert len(scans) == 1, scans
