"""The async facade offers what the synchronous classes offer, under the same names.

``AsyncSandboxRuntime`` says it has "the same methods" as ``SandboxRuntime``; it once lacked
five of them, found only by a user reaching for one.  The first half of this file checks
every public member of each synchronous class against its async twin (same parameters,
awaited where the synchronous one blocks); the second drives each member added to close
that gap on real ``local`` sandboxes.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from sandbox_runtime import (
    AsyncCommandHandle,
    AsyncSandboxPool,
    AsyncSandboxRuntime,
    CommandHandle,
    PathEscapeError,
    SandboxPool,
    SandboxRuntime,
    list_sandboxes,
)


def _local(tmp_path: Path) -> dict[str, Any]:
    return {"backend": "local", "options": {"base_dir": str(tmp_path)}}


# -- the members, compared -------------------------------------------------------------------


@dataclass
class Pair:
    """A synchronous class and its async twin, as instances (some members are set in
    ``__init__``, so the classes alone do not list them)."""

    sync: object
    facade: object
    not_awaited: set[str] = field(default_factory=set)
    """Methods that stay plain on the facade: they compute, or only hand out an object."""
    sync_only: set[str] = field(default_factory=set)
    """Public names that are no user API (each is explained where the pair is made)."""


#: Parameters only the facade has: where its blocking calls run.
FACADE_ONLY_PARAMETERS = {"executor"}


@pytest.fixture(params=["runtime", "pool", "handle"])
def pair(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Pair]:
    """Unstarted instances of one pair; constructing them starts no sandbox."""
    if request.param == "runtime":
        yield Pair(
            SandboxRuntime(**_local(tmp_path)), AsyncSandboxRuntime(**_local(tmp_path)), {"resolve"}
        )
    elif request.param == "pool":
        pool = SandboxPool(**_local(tmp_path), size=1)
        facade = AsyncSandboxPool(**_local(tmp_path), size=1)
        try:
            yield Pair(pool, facade, {"stats", "acquire"})
        finally:
            pool.close()
            facade.sync.close()
    else:
        handle = CommandHandle(SandboxRuntime(**_local(tmp_path)), "token", "true")
        # start() is the runtime's hook that puts the command on its thread: a caller of
        # either runtime gets a handle already started.
        yield Pair(handle, AsyncCommandHandle(handle, None), sync_only={"start"})


def _public(instance: object) -> list[str]:
    names = {name for name in dir(type(instance)) if not name.startswith("_")}
    names |= {name for name in vars(instance) if not name.startswith("_")}
    return sorted(names)


def _is_data(instance: object, name: str) -> bool:
    """A property or plain attribute, as opposed to a method."""
    static = inspect.getattr_static(instance, name)
    return isinstance(static, property) or not callable(static)


def _parameters(function: Any, *, facade: bool) -> list[tuple[str, Any, Any, Any]]:
    """``(name, kind, default, annotation)`` per parameter, the facade's own ones left out."""
    return [
        (p.name, p.kind, p.default, p.annotation)
        for p in inspect.signature(function).parameters.values()
        if not (facade and p.name in FACADE_ONLY_PARAMETERS)
    ]


def test_every_public_member_has_an_async_twin(pair: Pair) -> None:
    names = [name for name in _public(pair.sync) if name not in pair.sync_only]
    assert names, "the pair lists no members"
    missing = [name for name in names if not hasattr(pair.facade, name)]
    assert missing == [], f"{type(pair.facade).__name__} lacks these"
    for name in names:
        if _is_data(pair.sync, name):
            assert _is_data(pair.facade, name), f"{name} should be a property"
            continue
        sync_static = inspect.getattr_static(pair.sync, name)
        facade_static = inspect.getattr_static(pair.facade, name)
        assert isinstance(sync_static, classmethod) == isinstance(facade_static, classmethod), name
        sync_method = getattr(pair.sync, name)
        facade_method = getattr(pair.facade, name)
        assert _parameters(facade_method, facade=True) == _parameters(sync_method, facade=False), (
            f"{name}'s parameters differ"
        )
        awaited = name not in pair.not_awaited
        assert inspect.iscoroutinefunction(facade_method) == awaited, (
            f"{name} should {'' if awaited else 'not '}be a coroutine function"
        )
    if hasattr(pair.sync, "__enter__"):  # a `with` block becomes an `async with` one
        assert inspect.iscoroutinefunction(getattr(pair.facade, "__aenter__", None))
        assert inspect.iscoroutinefunction(getattr(pair.facade, "__aexit__", None))


def test_the_comparison_notices_a_missing_or_different_member(tmp_path: Path) -> None:
    """The check above is only as good as its eye: a facade lacking a method, or taking
    other parameters, must fail it."""

    class Lacking:
        async def exec(self, command: str) -> None:  # fewer parameters than the real one
            """Not the real signature."""

    sync = SandboxRuntime(**_local(tmp_path))
    with pytest.raises(AssertionError, match="lacks these"):
        test_every_public_member_has_an_async_twin(Pair(sync, Lacking()))
    assert _parameters(Lacking().exec, facade=True) != _parameters(sync.exec, facade=False)


# -- the members added, on real sandboxes ---------------------------------------------------


def test_connect_takes_over_a_running_sandbox_in_the_executor(tmp_path: Path) -> None:
    first = SandboxRuntime(**_local(tmp_path), workdir="/work").start()
    executor = ThreadPoolExecutor(max_workers=2)
    try:
        first.write_text("note.txt", "left by the first client")

        async def main() -> tuple[AsyncSandboxRuntime, str, bool]:
            taken = await AsyncSandboxRuntime.connect(
                "local", first.id, options={"base_dir": str(tmp_path)}, executor=executor
            )
            text = await taken.read_text("note.txt")  # relative: the sandbox's own workdir
            await taken.close()
            return taken, text, await taken.is_alive()

        taken, text, alive_after_close = asyncio.run(main())
        assert text == "left by the first client"
        assert taken.id == first.id
        assert taken.workdir == "/work"
        assert taken.executor is executor
        assert not alive_after_close
        assert not first.is_alive(), "closing the taken-over sandbox removes it"
    finally:
        first.close()
        executor.shutdown()


def test_workdir_resolve_and_backend_are_the_runtime_s(tmp_path: Path) -> None:
    async def main() -> None:
        async with AsyncSandboxRuntime(**_local(tmp_path), workdir="/work") as sandbox:
            assert sandbox.workdir == "/work"
            assert sandbox.resolve("a/../b.txt") == "/work/b.txt"
            assert sandbox.resolve("/etc") == "/etc"
            with pytest.raises(PathEscapeError):
                sandbox.resolve("../../../x")
            await sandbox.write_text("b.txt", "resolved")
            assert await sandbox.read_text(sandbox.resolve("b.txt")) == "resolved"

            assert sandbox.backend is sandbox.sync.backend
            assert sandbox.backend.sandbox_id == sandbox.id
            loop = asyncio.get_running_loop()
            assert await loop.run_in_executor(sandbox.executor, sandbox.backend.is_alive)

    asyncio.run(main())


def test_exec_background_waits_without_blocking_the_loop(tmp_path: Path) -> None:
    async def main() -> None:
        async with AsyncSandboxRuntime(**_local(tmp_path)) as sandbox:
            chunks: list[str] = []
            handle = await sandbox.exec_background("sleep 0.6; echo done", on_stdout=chunks.append)
            assert isinstance(handle, AsyncCommandHandle)
            assert isinstance(handle.sync, CommandHandle)
            assert handle.command == "sleep 0.6; echo done"
            assert not handle.done
            assert "running" in repr(handle)

            ticks = 0

            async def tick() -> None:
                nonlocal ticks
                while not handle.done:
                    ticks += 1
                    await asyncio.sleep(0.05)

            result, _ = await asyncio.gather(handle.wait(timeout=30), tick())
            assert result.stdout == "done\n"
            assert result.exit_code == 0
            assert "".join(chunks) == "done\n"
            assert handle.done
            assert not handle.killed
            assert ticks >= 5, "the event loop stalled while the command ran"

    asyncio.run(main())


def test_exec_background_kill_ends_the_command_and_what_it_started(tmp_path: Path) -> None:
    async def main() -> None:
        async with AsyncSandboxRuntime(**_local(tmp_path)) as sandbox:
            handle = await sandbox.exec_background(
                ["sh", "-c", "(sleep 3; echo late > late.txt) & echo started; sleep 60"]
            )
            with pytest.raises(concurrent.futures.TimeoutError):
                await handle.wait(timeout=0.3)
            began = time.monotonic()
            result = await handle.kill()
            assert result is not None
            assert time.monotonic() - began < 20
            assert result.exit_code != 0
            assert result.stdout == "started\n"
            assert handle.killed
            assert handle.done
            assert await handle.kill() == result, "killing an ended command returns its result"
            await asyncio.sleep(3.5)
            assert not await sandbox.exists("late.txt"), "the command's child outlived kill()"

    asyncio.run(main())


def test_pool_id_config_and_size_are_the_pool_s(tmp_path: Path) -> None:
    async def main() -> None:
        async with AsyncSandboxPool(**_local(tmp_path), size=1) as pool:
            assert pool.size == 1
            assert pool.id == pool.sync.id
            assert pool.config is pool.sync.config
            async with pool.acquire() as sandbox:
                assert sandbox.config.labels == pool.config.labels
                listed = list_sandboxes("local", options={"base_dir": str(tmp_path)})
                assert [info.pool for info in listed if info.sandbox_id == sandbox.id] == [pool.id]

    asyncio.run(main())


def test_fork_gives_awaitable_copies(tmp_path: Path) -> None:
    """docs/checkpoints.md says "the same methods, awaited"; fork once returned synchronous
    copies, whose calls would block the event loop."""

    async def main() -> None:
        async with AsyncSandboxRuntime(**_local(tmp_path)) as sandbox:
            await sandbox.write_text("state.txt", "forked")
            results = await sandbox.fork(2)
            assert [result.index for result in results] == [0, 1]
            for result in results:
                assert result.ok
                copy = result.unwrap()
                assert isinstance(copy, AsyncSandboxRuntime)
                try:
                    assert await copy.read_text("state.txt") == "forked"
                    assert copy.executor is sandbox.executor
                finally:
                    await copy.close()

    asyncio.run(main())
