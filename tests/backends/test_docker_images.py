"""Images at scale on the docker backend, against a real registry behind a slow link.

Debian's ``docker-registry`` holds 32 images of 1 MB of incompressible bytes each; the
engine pulls them through :class:`ThrottledProxy` (2 MB/s shared), so a pull takes about
half a second alone and seconds when several share the link.  The budget, the pins, the
"never an image in use" rule, and typed pull errors are checked against the engine's own
answers, not a mock.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from sandbox_runtime import ImagePullError, SandboxConfig, SandboxRuntime, SandboxStartError
from sandbox_runtime.backends.docker import DockerBackend
from sandbox_runtime.backends.docker._options import DockerOptions
from sandbox_runtime.backends.docker._pull import pull
from tests.backends.local_registry import (
    LocalRegistry,
    ThrottledProxy,
    free_port,
    push_random_image,
    registry_problem,
)
from tests.conftest import require

pytestmark = pytest.mark.docker

IMAGES = 32
PAYLOAD = 1_000_000
BUDGET = 8 * PAYLOAD + PAYLOAD // 2


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory, docker_image: str) -> Iterator[Any]:
    require(registry_problem())
    local = LocalRegistry(tmp_path_factory.mktemp("registry"))
    for index in range(IMAGES):
        push_random_image(local.url, "swe/task", f"t{index:02d}", PAYLOAD)
    yield local
    local.close()


@pytest.fixture
def engine(docker_image: str) -> Any:
    import docker

    return docker.APIClient(version="auto")


@pytest.fixture
def link(registry: LocalRegistry, engine: Any) -> Iterator[Callable[..., ThrottledProxy]]:
    """Slow links to the registry; at the end, the images pulled through them are removed.

    Only those: under ``-n 2`` another test's images (another proxy port) stay.
    """
    made: list[ThrottledProxy] = []

    def make(**faults: int) -> ThrottledProxy:
        proxy = ThrottledProxy(registry.port, 2_000_000, **faults)
        made.append(proxy)
        return proxy

    yield make
    for proxy in made:
        proxy.close()
        prefix = f"127.0.0.1:{proxy.port}/"
        for item in engine.images():
            for tag in item.get("RepoTags") or ():
                if tag.startswith(prefix):
                    engine.remove_image(tag, force=True)


def _options(tmp_path: Path, **extra: Any) -> DockerOptions:
    return DockerOptions(image_record=str(tmp_path / "images.json"), **extra)


def _ours_on_disk(engine: Any, port: int) -> dict[str, int]:
    """Our test images the engine holds now, and their sizes (its own figures)."""
    prefix = f"127.0.0.1:{port}/swe/task:"
    return {
        tag: int(item["Size"])
        for item in engine.images()
        for tag in item.get("RepoTags") or ()
        if tag.startswith(prefix)
    }


def test_budget_holds_and_spares_what_is_used_or_scheduled(
    link: Callable[..., ThrottledProxy], engine: Any, tmp_path: Path
) -> None:
    proxy = link()
    options = _options(tmp_path, image_cache_budget=BUDGET, prefetch_concurrency=3)
    cache = DockerBackend._images(options)
    refs = [f"127.0.0.1:{proxy.port}/swe/task:t{index:02d}" for index in range(IMAGES)]
    # Someone else's container holds the first image for the whole run.
    cache.ensure(refs[0])
    held = engine.create_container(refs[0], command=["true"])["Id"]
    high_water = 0
    try:
        for index, ref in enumerate(refs[1:], start=1):
            upcoming = refs[index : index + 3]
            DockerBackend.prefetch_images(upcoming, options)  # the hook the prefetcher calls
            cache.starting(ref)
            cache.ensure(ref)
            container = engine.create_container(ref, command=["true"])["Id"]
            engine.remove_container(container)
            cache.closed(ref, delete=False)
            anytime = sum(_ours_on_disk(engine, proxy.port).values())
            assert anytime <= BUDGET  # pulls in flight reserve room: the budget holds throughout
            cache.wait_pulls(timeout=60)  # each landed pull evicted before it resolved
            on_disk = _ours_on_disk(engine, proxy.port)
            high_water = max(high_water, sum(on_disk.values()))
            assert sum(on_disk.values()) <= BUDGET, (index, sorted(on_disk))
            assert refs[0] in on_disk  # in use by a container: never evicted
            scheduled = set(refs[index + 1 : index + 3])
            assert scheduled & set(cache.record.entries()) <= set(on_disk)  # pinned: kept
    finally:
        engine.remove_container(held)
        proxy.close()
    assert cache.evictions >= IMAGES - 9
    assert high_water > BUDGET - 2 * PAYLOAD  # the budget was used, not just undershot


def test_prefetch_pulls_ahead_once_and_a_start_waits_for_it(
    link: Callable[..., ThrottledProxy], engine: Any, tmp_path: Path
) -> None:
    proxy = link()
    options = _options(tmp_path, prefetch_concurrency=4)
    cache = DockerBackend._images(options)
    refs = [f"127.0.0.1:{proxy.port}/swe/task:t{index:02d}" for index in range(4)]
    try:
        futures = cache.prefetch(refs + refs)  # duplicates and a second call pull nothing twice
        assert len(futures) == 4
        assert cache.prefetch(refs) == []
        began = time.monotonic()
        cache.ensure(refs[3])  # joins the pull in flight instead of starting another
        waited = time.monotonic() - began
        for future in futures:
            future.result(timeout=60)
    finally:
        proxy.close()
    assert cache.pulls == 4
    assert waited > 0.3  # it really waited on the slow link
    assert set(refs) <= set(_ours_on_disk(engine, proxy.port))
    assert cache.prefetch(refs) == []  # present: nothing to do


def test_the_budget_holds_from_the_first_pull_of_a_run(
    link: Callable[..., ThrottledProxy], engine: Any, tmp_path: Path
) -> None:
    """No image of ours measured yet: the pulls in flight once reserved nothing, and four
    pre-pulls at once overshot the budget by the images of unknown size."""
    proxy = link()
    budget = 2 * PAYLOAD + PAYLOAD // 2
    options = _options(tmp_path, image_cache_budget=budget, prefetch_concurrency=4)
    cache = DockerBackend._images(options)
    refs = [f"127.0.0.1:{proxy.port}/swe/task:t{index:02d}" for index in range(8, 12)]
    seen: list[int] = []
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            seen.append(sum(_ours_on_disk(engine, proxy.port).values()))
            time.sleep(0.05)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        cache.prefetch(refs)
        cache.wait_pulls(timeout=60)
    finally:
        done.set()
        watcher.join()
        proxy.close()
    assert max(seen) <= budget, max(seen)
    assert cache.pulls >= 2  # the budget was used: two fit


def test_image_pin_zero_keeps_a_start_s_pull_through_its_create(
    link: Callable[..., ThrottledProxy], engine: Any, tmp_path: Path
) -> None:
    """``image_pin: 0`` once let the eviction after a start's own pull remove the image
    before its container was created ("No such image", not an ImagePullError)."""
    proxy = link()
    options = _options(tmp_path, image_cache_budget=PAYLOAD + PAYLOAD // 2, image_pin=0)
    cache = DockerBackend._images(options)
    first, second = (f"127.0.0.1:{proxy.port}/swe/task:t{index:02d}" for index in (12, 13))
    made: list[str] = []
    try:
        for ref in (first, second):  # as the backend starts a sandbox: pin, pull, create
            cache.starting(ref)
            cache.ensure(ref)
            made.append(engine.create_container(ref, command=["true"])["Id"])
    finally:
        for container in made:
            engine.remove_container(container)
        proxy.close()
    assert len(made) == 2


def test_delete_image_removes_only_what_we_pulled(
    link: Callable[..., ThrottledProxy], engine: Any, tmp_path: Path, docker_image: str
) -> None:
    proxy = link()
    options = _options(tmp_path, delete_image=True)
    cache = DockerBackend._images(options)
    ref = f"127.0.0.1:{proxy.port}/swe/task:t05"
    try:
        cache.ensure(ref)
        cache.closed(ref, delete=True)
        cache.closed(docker_image, delete=True)  # the user's image: not in our record
    finally:
        proxy.close()
    assert ref not in _ours_on_disk(engine, proxy.port)
    assert engine.images(name=docker_image)


def test_a_missing_tag_is_a_typed_error_naming_the_registry(
    link: Callable[..., ThrottledProxy], engine: Any
) -> None:
    proxy = link()
    where = f"127.0.0.1:{proxy.port}"
    began = time.monotonic()
    try:
        with pytest.raises(ImagePullError) as caught:
            pull(engine, f"{where}/swe/task:nope")
    finally:
        proxy.close()
    assert caught.value.registry == where
    assert "manifest unknown" in caught.value.reason
    assert not caught.value.transient
    assert where in str(caught.value)
    assert time.monotonic() - began < 5  # not retried


def test_an_unreachable_registry_fails_the_start_naming_it(docker_image: str) -> None:
    where = f"127.0.0.1:{free_port()}"  # nothing listens there
    config = SandboxConfig(backend="docker", image=f"{where}/swe/task:t00")
    with pytest.raises(SandboxStartError) as caught:
        SandboxRuntime(config).start()
    assert isinstance(caught.value, ImagePullError)
    assert caught.value.registry == where
    assert caught.value.transient  # retried, then reported
    assert "connection refused" in caught.value.reason
    assert where in str(caught.value)


def test_a_transient_registry_failure_is_retried(
    link: Callable[..., ThrottledProxy], engine: Any
) -> None:
    # The engine itself gives up after 4 connections answered 503; the next try gets through.
    proxy = link(fail_first=5)
    try:
        pull(engine, f"127.0.0.1:{proxy.port}/swe/task:t07")
    finally:
        proxy.close()
    assert proxy.connections > 5
    assert f"127.0.0.1:{proxy.port}/swe/task:t07" in _ours_on_disk(engine, proxy.port)
