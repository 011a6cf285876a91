"""Behaviours where the emulator must answer as the real service does, seen through the
unmodified e2b SDK's public API (run at the newest release and at 2.15.2, like
``test_e2b_sdk.py``): timeouts, a sandbox killed under a running command, envd's file
semantics, dead instances, listing, gzip downloads, filesystem watch and PTYs.  Each
section names the source it follows; ``docs/ags-emulator.md`` lists them too."""

from __future__ import annotations

import datetime
import inspect
import threading
import time
import uuid
from collections.abc import Callable, Iterator

import e2b
import httpcore
import httpx
import pytest
from e2b import Sandbox, WatchHandle

from sandbox_runtime_emulators.ags.server import AgsEmulator

pytestmark = pytest.mark.e2b_sdk


def _opts(emulator: AgsEmulator) -> dict[str, str]:
    return {"api_key": emulator.api_key, "api_url": emulator.url, "sandbox_url": emulator.url}


@pytest.fixture
def sandbox(emulator: AgsEmulator) -> Iterator[Sandbox]:
    created = Sandbox.create(template="default", timeout=120, **_opts(emulator))
    try:
        yield created
    finally:
        created.kill()


def _until(check: Callable[[], bool], seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.1)
    return check()


def _gone(sandbox: Sandbox) -> bool:
    try:
        sandbox.get_info()
    except e2b.NotFoundException:
        return True
    return False


def _end_in(sandbox: Sandbox) -> float:
    """Seconds left until the sandbox's end, as ``get_info`` reports it."""
    end = sandbox.get_info().end_at
    left: float = (end - datetime.datetime.now(datetime.timezone.utc)).total_seconds()
    return left


def _listed_ids(emulator: AgsEmulator, **kwargs: object) -> list[str]:
    paginator = Sandbox.list(**kwargs, **_opts(emulator))
    ids: list[str] = []
    while paginator.has_next:
        ids += [item.sandbox_id for item in paginator.next_items()]
    return ids


# -- 1. set_timeout (E2B's API: the end becomes now + timeout, shorter or longer) ----------


def test_set_timeout_shortens_and_connect_never_does(emulator: AgsEmulator) -> None:
    created = Sandbox.create(template="default", timeout=120, **_opts(emulator))
    try:
        assert _end_in(created) > 100
        # connect only ever extends a lifetime (E2B's KeepAliveFor without allowShorter).
        Sandbox.connect(created.sandbox_id, timeout=5, **_opts(emulator))
        assert _end_in(created) > 100
        created.set_timeout(2)
        assert _end_in(created) <= 2.5
        assert _until(lambda: not created.is_running(), 10)
        assert _gone(created)
    finally:
        created.kill()
    longer = Sandbox.create(template="default", timeout=30, **_opts(emulator))
    try:
        longer.set_timeout(600)
        assert 590 < _end_in(longer) <= 600
    finally:
        longer.kill()


def test_create_takes_any_positive_timeout_up_to_a_day(emulator: AgsEmulator) -> None:
    brief = Sandbox.create(template="default", timeout=3, **_opts(emulator))
    try:
        assert _end_in(brief) <= 3.5  # not raised to a floor
        assert _until(lambda: not brief.is_running(), 10)
    finally:
        brief.kill()
    with pytest.raises(e2b.SandboxException, match="greater than 24 hours"):
        Sandbox.create(template="default", timeout=25 * 3600, **_opts(emulator))


# -- 2. a sandbox killed under a streaming command (the proxy cuts the stream) ------------


def test_kill_while_a_command_streams_raises_in_the_sdk(emulator: AgsEmulator) -> None:
    created = Sandbox.create(template="default", timeout=120, **_opts(emulator))
    seen: list[str] = []
    outcome: dict[str, object] = {}

    def run() -> None:
        try:
            outcome["result"] = created.commands.run(
                "echo started; sleep 30", on_stdout=seen.append
            )
        except Exception as exc:  # what the SDK raises is the point of the test
            outcome["error"] = exc

    thread = threading.Thread(target=run)
    thread.start()
    assert _until(lambda: bool(seen), 10), "the command never started"
    assert created.kill()
    thread.join(20)
    assert not thread.is_alive()
    assert "result" not in outcome, "a killed sandbox's command must not finish cleanly"
    error = outcome["error"]
    # A clean end without an end event would read "Command ended without an end event";
    # the cut stream is what the SDK maps to SandboxNotRunningException (e2b >= 2.35) or
    # lets through as the transport's error (older releases).
    assert "end event" not in str(error)
    assert not isinstance(error, e2b.CommandExitException), error
    cut = (e2b.SandboxException, httpx.RemoteProtocolError, httpcore.RemoteProtocolError)
    assert isinstance(error, cut), repr(error)


# -- 3. envd's Remove is os.RemoveAll ---------------------------------------------------------


def test_removing_a_missing_path_succeeds(sandbox: Sandbox) -> None:
    sandbox.files.remove("/tmp/never-there")
    sandbox.files.remove("/tmp/never/there/either")
    sandbox.files.write("/tmp/gone.txt", "x")
    sandbox.files.remove("/tmp/gone.txt")
    sandbox.files.remove("/tmp/gone.txt")
    assert not sandbox.files.exists("/tmp/gone.txt")


# -- 4. entry info as envd builds it (Perm() bits, Go's mode string, resolved links) -------


def test_entries_report_permission_bits_and_resolved_links(sandbox: Sandbox) -> None:
    sandbox.files.make_dir("/tmp/e/dir")
    sandbox.files.write("/tmp/e/file.txt", "12345")
    sandbox.commands.run(
        "cd /tmp/e && chmod 755 dir && chmod 640 file.txt && ln -s file.txt rel"
        " && ln -s /tmp/e/dir abs && ln -s rel chain && ln -s /tmp/e/none broken"
    )
    entries = {entry.name: entry for entry in sandbox.files.list("/tmp/e")}
    # A broken link has no type, and the SDK leaves typeless entries out of a listing.
    assert sorted(entries) == ["abs", "chain", "dir", "file.txt", "rel"]
    directory, regular = entries["dir"], entries["file.txt"]
    assert (directory.mode, directory.permissions) == (0o755, "drwxr-xr-x")
    assert directory.type == e2b.FileType.DIR
    assert (regular.mode, regular.permissions, regular.size) == (0o640, "-rw-r-----", 5)
    assert directory.symlink_target is None
    assert regular.symlink_target is None
    for name, target, kind, mode in (
        ("rel", "/tmp/e/file.txt", e2b.FileType.FILE, 0o640),
        ("chain", "/tmp/e/file.txt", e2b.FileType.FILE, 0o640),
        ("abs", "/tmp/e/dir", e2b.FileType.DIR, 0o755),
    ):
        link = entries[name]
        assert link.symlink_target == target, name
        assert link.type == kind, name
        assert link.mode == mode, name
        assert link.permissions == "Lrwxrwxrwx", name
        assert link.path == f"/tmp/e/{name}"
    broken = sandbox.files.get_info("/tmp/e/broken")
    assert (broken.symlink_target, broken.mode, broken.type) == ("/tmp/e/broken", 0, None)
    info = sandbox.files.get_info("/tmp/e/chain")
    assert (info.symlink_target, info.mode) == ("/tmp/e/file.txt", 0o640)
    sticky = sandbox.files.get_info("/tmp")
    assert (sticky.mode, sticky.permissions) == (0o777, "dtrwxrwxrwx")


# -- 5. an instance whose envd or container died is no longer running ---------------------


def test_a_dead_instance_is_not_running_in_any_status_call(emulator: AgsEmulator) -> None:
    created = Sandbox.create(template="default", timeout=120, **_opts(emulator))
    try:
        # envd is the parent of every command's shell: killing it kills the instance.
        created.commands.run("kill -9 $PPID", background=True)
        assert _until(lambda: _gone(created), 15), "get_info still finds the dead sandbox"
        assert not created.is_running()
        assert created.sandbox_id not in _listed_ids(emulator)
        with pytest.raises(e2b.SandboxException):
            created.commands.run("true")
    finally:
        created.kill()


# -- 6. listing: order, startedAfter, template, keyset pages; gzip as envd 0.5.7 ----------


def _supports_list_filters() -> bool:
    query_fields = inspect.signature(e2b.SandboxQuery).parameters
    return "order" in inspect.signature(Sandbox.list).parameters and "template" in query_fields


@pytest.mark.e2b_current
def test_list_honours_order_started_after_and_template(emulator: AgsEmulator) -> None:
    assert _supports_list_filters(), "needs an e2b with order/template queries"
    suite = uuid.uuid4().hex
    made = []
    try:
        for _ in range(3):
            made.append(
                Sandbox.create(
                    template="default", timeout=120, metadata={"suite": suite}, **_opts(emulator)
                )
            )
            time.sleep(0.01)
        ids = [s.sandbox_id for s in made]
        mine = e2b.SandboxQuery(metadata={"suite": suite})
        assert _listed_ids(emulator, query=mine, limit=1) == ids[::-1]  # newest first
        assert _listed_ids(emulator, query=mine, limit=2, order="asc") == ids
        second_start = made[1].get_info().started_at
        after = e2b.SandboxQuery(metadata={"suite": suite}, started_after=second_start)
        assert _listed_ids(emulator, query=after, order="asc") == ids[1:]
        by_name = e2b.SandboxQuery(metadata={"suite": suite}, template="default")
        assert sorted(_listed_ids(emulator, query=by_name)) == sorted(ids)
        unknown = e2b.SandboxQuery(metadata={"suite": suite}, template="no-such-template")
        assert _listed_ids(emulator, query=unknown) == []
        with pytest.raises(e2b.InvalidArgumentException):
            _listed_ids(emulator, query=mine, order="sideways")
    finally:
        for created in made:
            created.kill()


def test_list_pages_do_not_shift_when_sandboxes_start_between_them(
    emulator: AgsEmulator,
) -> None:
    suite = uuid.uuid4().hex
    made = [
        Sandbox.create(
            template="default", timeout=120, metadata={"suite": suite}, **_opts(emulator)
        )
        for _ in range(3)
    ]
    try:
        paginator = Sandbox.list(
            query=e2b.SandboxQuery(metadata={"suite": suite}), limit=2, **_opts(emulator)
        )
        first = [item.sandbox_id for item in paginator.next_items()]
        made.append(
            Sandbox.create(
                template="default", timeout=120, metadata={"suite": suite}, **_opts(emulator)
            )
        )
        rest = [item.sandbox_id for item in paginator.next_items()]
        assert not paginator.has_next
        assert sorted(first + rest) == sorted(s.sandbox_id for s in made[:3])
    finally:
        for created in made:
            created.kill()


@pytest.mark.e2b_current
def test_gzip_downloads_as_envd_0_5_7(sandbox: Sandbox) -> None:
    assert "gzip" in inspect.signature(sandbox.files.read).parameters, "needs a newer e2b"
    payload = b"compress me " * 1000
    sandbox.files.write("/tmp/big.txt", payload)
    read = sandbox.files.read("/tmp/big.txt", format="bytes", gzip=True)
    assert bytes(read) == payload


# -- filesystem watch: envd's inotify events, polled (sync SDK) and streamed (async SDK) --


def _kinds(events: list[e2b.FilesystemEvent]) -> set[tuple[str, str]]:
    return {(event.name, event.type.value) for event in events}


def _collect(handle: WatchHandle, into: list[e2b.FilesystemEvent]) -> set[tuple[str, str]]:
    """Add the handle's new events to ``into``; the kinds seen so far."""
    into.extend(handle.get_new_events())
    return _kinds(into)


def test_watch_dir_reports_changes_through_polling(sandbox: Sandbox) -> None:
    sandbox.files.make_dir("/tmp/w/sub")
    handle = sandbox.files.watch_dir("/tmp/w", recursive=True)
    try:
        sandbox.files.write("/tmp/w/a.txt", "1")
        sandbox.commands.run(
            "cd /tmp/w && chmod 600 a.txt && mv a.txt b.txt && echo x > sub/deep.txt"
            " && mkdir sub/new"
        )
        seen: list[e2b.FilesystemEvent] = []
        # A new directory is watched once its creation is seen (as envd's fsnotify does): a
        # file made in it before then is not reported, so the test waits for that first.
        assert _until(lambda: ("sub/new", "create") in _collect(handle, seen))
        sandbox.commands.run("cd /tmp/w && echo y > sub/new/later.txt && rm b.txt")
        expected = {
            ("a.txt", "create"),
            ("a.txt", "write"),
            ("a.txt", "chmod"),
            ("a.txt", "rename"),
            ("b.txt", "create"),
            ("sub/deep.txt", "create"),
            ("sub/new", "create"),
            ("sub/new/later.txt", "create"),
            ("b.txt", "remove"),
        }
        assert _until(lambda: expected <= _collect(handle, seen))
        assert handle.get_new_events() == []  # taken once
    finally:
        handle.stop()
    flat = sandbox.files.watch_dir("/tmp/w")
    try:
        sandbox.files.write("/tmp/w/sub/ignored.txt", "not watched: not recursive")
        sandbox.files.write("/tmp/w/top.txt", "watched")
        got: list[e2b.FilesystemEvent] = []
        assert _until(lambda: ("top.txt", "create") in _collect(flat, got))
        assert all(not event.name.startswith("sub/") for event in got)
    finally:
        flat.stop()
    with pytest.raises(e2b.NotFoundException):
        sandbox.files.watch_dir("/tmp/no-such-dir")


def test_watch_dir_streams_to_the_async_sdk(emulator: AgsEmulator, sandbox: Sandbox) -> None:
    import asyncio

    async def watch() -> set[tuple[str, str]]:
        connected = await e2b.AsyncSandbox.connect(sandbox.sandbox_id, **_opts(emulator))
        events: list[e2b.FilesystemEvent] = []
        await connected.files.make_dir("/tmp/aw")
        handle = await connected.files.watch_dir("/tmp/aw", on_event=events.append, timeout=30)
        try:
            await connected.files.write("/tmp/aw/streamed.txt", "s")
            for _ in range(100):
                if ("streamed.txt", "write") in _kinds(events):
                    break
                await asyncio.sleep(0.05)
        finally:
            await handle.stop()
        return _kinds(events)

    assert {("streamed.txt", "create"), ("streamed.txt", "write")} <= asyncio.run(watch())


# -- PTY: a terminal of the requested size, input, resize, exit -------------------------------


def test_pty_is_a_terminal_that_takes_input_and_resizes(sandbox: Sandbox) -> None:
    output: list[bytes] = []
    terminal = sandbox.pty.create(e2b.PtySize(rows=24, cols=80), timeout=30)

    def seen() -> str:
        return b"".join(output).decode(errors="replace")

    waiter = threading.Thread(target=lambda: terminal.wait(on_pty=output.append), daemon=True)
    waiter.start()
    sandbox.pty.send_stdin(terminal.pid, b"tty; stty size; echo term=$TERM\n")
    assert _until(lambda: "term=xterm-256color" in seen()), seen()
    assert "/dev/pts/" in seen()
    assert "24 80" in seen()
    sandbox.pty.resize(terminal.pid, e2b.PtySize(rows=40, cols=120))
    sandbox.pty.send_stdin(terminal.pid, b"stty size\n")
    assert _until(lambda: "40 120" in seen()), seen()
    with pytest.raises(e2b.SandboxException):
        sandbox.commands.send_stdin(terminal.pid, "not the pty")
    sandbox.pty.send_stdin(terminal.pid, b"exit 0\n")
    waiter.join(15)
    assert not waiter.is_alive()
    assert terminal.pid not in [p.pid for p in sandbox.commands.list()]
