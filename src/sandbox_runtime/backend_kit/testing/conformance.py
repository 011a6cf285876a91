"""The shared behaviour tests, as a pytest mixin (see the package docstring for adoption).

Each test states one promise of :class:`~sandbox_runtime.SandboxRuntime` that users rely on;
a backend is done when every one of them passes against a real engine.  The suite uses
workdir-relative paths wherever a file written through the API must be seen by a command,
because the ``local`` backend without namespaces maps only the file API into its root; the
tests that need absolute paths to agree are gated on ``shares_absolute_paths``.
"""

from __future__ import annotations

import asyncio
import os
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest

from sandbox_runtime import (
    TIMEOUT_EXIT_CODE,
    AsyncSandboxRuntime,
    Capability,
    CommandFailedError,
    ConfigError,
    ExecResult,
    PathEscapeError,
    SandboxClosedError,
    SandboxConfig,
    SandboxError,
    SandboxFileNotFoundError,
    SandboxGoneError,
    SandboxIsADirectoryError,
    SandboxNotADirectoryError,
    SandboxRuntime,
    SandboxTimeoutError,
    list_sandboxes,
    load_backend,
)
from sandbox_runtime.backend_kit.testing.checkpoints import CheckpointConformance
from sandbox_runtime.backend_kit.testing.leases import LeaseConformance

__all__ = ["SandboxConformance"]

_GIT = "git -c user.email=t@example.com -c user.name=t -c init.defaultBranch=main"


class SandboxConformance(CheckpointConformance, LeaseConformance):
    """Mixin of conformance tests; subclasses provide a ``sandbox_config`` fixture.

    The checkpoint, fork and pause tests with the determinism canary come from
    :class:`~sandbox_runtime.backend_kit.testing.checkpoints.CheckpointConformance`.
    """

    #: False for backends whose commands see host paths (``local`` without namespaces).
    shares_absolute_paths: ClassVar[bool] = True

    @pytest.fixture
    def sandbox(self, sandbox_config: SandboxConfig) -> Iterator[SandboxRuntime]:
        """A started sandbox, closed after the test."""
        with SandboxRuntime(sandbox_config) as sandbox:
            yield sandbox

    @pytest.fixture
    def repo(self, sandbox: SandboxRuntime) -> SandboxRuntime:
        """The sandbox with a committed git repository in its workdir."""
        sandbox.write_text("src/app.py", "def answer():\n    return 41\n")
        sandbox.write_text("README.md", "demo\n")
        sandbox.exec(f"{_GIT} init -q . && {_GIT} add -A && {_GIT} commit -qm base", check=True)
        return sandbox

    # -- exec ------------------------------------------------------------------------------

    def test_exec_separates_streams_and_returns_exit_code(self, sandbox: SandboxRuntime) -> None:
        result = sandbox.exec("echo out; echo err >&2; exit 3")
        assert result.exit_code == 3
        assert result.stdout == "out\n"
        assert result.stderr == "err\n"
        assert not result.ok
        assert not result.timed_out
        assert result.duration >= 0

    def test_exec_argument_vector_runs_without_shell(self, sandbox: SandboxRuntime) -> None:
        result = sandbox.exec(["printf", "%s|", "a b", "$HOME", "*"])
        assert result.stdout == "a b|$HOME|*|"

    def test_exec_shell_text_uses_a_shell(self, sandbox: SandboxRuntime) -> None:
        result = sandbox.exec("X=5; echo $((X * 2)) | tr 0 o")
        assert result.stdout == "1o\n"

    def test_missing_program_exits_127(self, sandbox: SandboxRuntime) -> None:
        assert sandbox.exec(["no-such-program-xyz"]).exit_code == 127
        assert sandbox.exec("no-such-program-xyz").exit_code == 127

    def test_a_command_killed_by_a_signal_exits_as_a_shell_reports_it(
        self, sandbox: SandboxRuntime
    ) -> None:
        # 128 + the signal, as bash reports a child's death: graders read 139 as a crash.
        # Here the command's own shell dies, which no parent shell translates.
        assert sandbox.exec("kill -SEGV $$").exit_code == 139
        assert sandbox.exec("kill -ABRT $$").exit_code == 134
        assert sandbox.exec(["sh", "-c", "kill -TERM $$"]).exit_code == 143
        assert sandbox.exec("sleep 30 & kill -KILL $!; wait $!").exit_code == 137

    def test_exit_status_128_is_the_commands_own(
        self, sandbox: SandboxRuntime, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        # A code above 128 may be the sandbox's death, so the backend is asked whether it
        # lives; 128 is no signal (git exits 128 on every "fatal:"), and asking would cost
        # each such command the settle wait.
        asked: list[bool] = []
        is_alive = sandbox.backend.is_alive

        def counted() -> bool:
            asked.append(True)
            return is_alive()

        def questions(command: str | list[str], code: int) -> int:
            asked.clear()
            assert sandbox.exec(command).exit_code == code
            return len(asked)

        monkeypatch.setattr(sandbox.backend, "is_alive", counted)
        usual = questions("exit 0", 0)  # a backend may look before every command
        assert questions("exit 128", 128) == usual
        assert questions(["sh", "-c", "kill -TERM $$"], 143) > usual, "a signal's code asks"

    def test_exec_runs_in_workdir_by_default(self, sandbox: SandboxRuntime) -> None:
        sandbox.write_text("marker.txt", "here")
        assert sandbox.exec("cat marker.txt").stdout == "here"

    def test_exec_cwd_per_call(self, sandbox: SandboxRuntime) -> None:
        sandbox.write_text("sub/dir/inner.txt", "inner")
        assert sandbox.exec("cat inner.txt", cwd="sub/dir").stdout == "inner"

    def test_exec_missing_cwd_is_a_clear_error(self, sandbox: SandboxRuntime) -> None:
        with pytest.raises(SandboxFileNotFoundError, match="no-such-dir"):
            sandbox.exec("true", cwd="no-such-dir")

    def test_exec_env_from_config_and_call(self, sandbox_config: SandboxConfig) -> None:
        config = sandbox_config.model_copy(update={"env": {"FROM_CONFIG": "c", "BOTH": "config"}})
        with SandboxRuntime(config) as sandbox:
            result = sandbox.exec(
                'printf "%s %s %s" "$FROM_CONFIG" "$FROM_CALL" "$BOTH"',
                env={"FROM_CALL": "k", "BOTH": "call"},
            )
        assert result.stdout == "c k call"

    def test_exec_unicode_command_and_env(self, sandbox: SandboxRuntime) -> None:
        result = sandbox.exec('printf "%s/%s" "héllo ✓" "$GREETING"', env={"GREETING": "你好"})
        assert result.stdout == "héllo ✓/你好"

    def test_exec_binary_and_non_utf8_output(self, sandbox: SandboxRuntime) -> None:
        result = sandbox.exec(r"printf 'a\000b\377\376c'")
        assert result.stdout_bytes == b"a\x00b\xff\xfec"
        assert result.stdout == "a\x00b\ufffd\ufffdc"

    def test_exec_stdin(self, sandbox: SandboxRuntime) -> None:
        assert sandbox.exec("tr a-z A-Z", stdin="hello\n").stdout == "HELLO\n"

    def test_exec_large_stdin_and_output(self, sandbox: SandboxRuntime) -> None:
        payload = bytes(range(256)) * 8192  # 2 MiB, every byte value
        result = sandbox.exec("cat", stdin=payload)
        assert result.stdout_bytes == payload
        assert not result.truncated

    def test_output_cap_keeps_head_and_tail(self, sandbox: SandboxRuntime) -> None:
        script = "echo FIRST-LINE; yes middle | head -n 200000; echo LAST-LINE"
        result = sandbox.exec(script, max_output_bytes=4096)
        assert result.stdout_truncated
        assert not result.stderr_truncated
        assert result.stdout.startswith("FIRST-LINE\n")
        assert result.stdout.endswith("LAST-LINE\n")
        assert "bytes omitted" in result.stdout
        assert len(result.stdout_bytes) < 4096 + 200
        assert result.exit_code == 0

    def test_timeout_fires_and_keeps_partial_output(self, sandbox: SandboxRuntime) -> None:
        began = time.monotonic()
        result = sandbox.exec("echo before; echo warn >&2; sleep 60; echo after", timeout=1)
        elapsed = time.monotonic() - began
        assert result.timed_out
        assert result.exit_code == TIMEOUT_EXIT_CODE
        assert result.stdout == "before\n"
        assert result.stderr == "warn\n"
        assert elapsed < 15

    def test_timeout_kills_the_whole_process_group(self, sandbox: SandboxRuntime) -> None:
        # A background child would create the file after 3 s if the timeout spared it.
        result = sandbox.exec("(sleep 3; echo late > late.txt) & sleep 60", timeout=1)
        assert result.timed_out
        time.sleep(4)
        assert not sandbox.exists("late.txt")
        assert sandbox.exec("echo still-usable").stdout == "still-usable\n"

    def test_timeout_kills_children_that_left_the_group(self, sandbox: SandboxRuntime) -> None:
        # setsid puts the child in a new session, out of reach of a process-group kill.
        result = sandbox.exec(
            "(setsid sh -c 'sleep 3; echo late > late.txt' &) ; sleep 60", timeout=1
        )
        assert result.timed_out
        time.sleep(4)
        assert not sandbox.exists("late.txt")

    def test_output_streams_while_the_command_runs(self, sandbox: SandboxRuntime) -> None:
        seen: list[tuple[str, str, float]] = []
        began = time.monotonic()
        result = sandbox.exec(
            "printf 'first\\n'; printf 'warn\\n' >&2; sleep 2; printf 'caf\\303\\251\\n'",
            on_stdout=lambda text: seen.append(("out", text, time.monotonic() - began)),
            on_stderr=lambda text: seen.append(("err", text, time.monotonic() - began)),
        )
        assert result.stdout == "first\ncafé\n"
        assert "".join(text for kind, text, _ in seen if kind == "out") == result.stdout
        assert "".join(text for kind, text, _ in seen if kind == "err") == "warn\n"
        if Capability.STREAMING in sandbox.backend.capabilities_for(sandbox.backend.options):
            first = next(at for kind, text, at in seen if "first" in text)
            assert first < result.duration - 1.0  # delivered before the command's last second

    def test_a_raising_output_callback_does_not_break_the_command(
        self, sandbox: SandboxRuntime
    ) -> None:
        def broken(text: str) -> None:
            raise RuntimeError("observer bug")

        result = sandbox.exec("echo one; echo two", on_stdout=broken)
        assert (result.exit_code, result.stdout) == (0, "one\ntwo\n")

    def test_background_command_wait_and_kill(self, sandbox: SandboxRuntime) -> None:
        lines: list[str] = []
        quick = sandbox.exec_background("sleep 1; echo done", on_stdout=lines.append)
        assert not quick.done
        assert quick.wait(timeout=30).stdout == "done\n"
        assert "".join(lines) == "done\n"
        # A long command and what it started in a new session are killed, not waited for.
        started = threading.Event()
        slow = sandbox.exec_background(
            "(setsid sh -c 'sleep 4; echo late > bg-late.txt' &); echo started; sleep 60",
            on_stdout=lambda text: started.set(),
        )
        assert started.wait(20), "the background command's output never arrived"
        began = time.monotonic()
        result = slow.kill()
        assert result is not None
        assert time.monotonic() - began < 20
        assert result.exit_code != 0
        assert result.stdout == "started\n"
        assert slow.killed
        time.sleep(5)
        assert not sandbox.exists("bg-late.txt")
        assert sandbox.exec("echo still-usable").stdout == "still-usable\n"

    def test_a_command_whose_sandbox_dies_is_sandbox_gone(
        self, sandbox_config: SandboxConfig
    ) -> None:
        sandbox = SandboxRuntime(sandbox_config).start()
        try:
            outcome: list[BaseException | ExecResult] = []

            def run() -> None:
                try:
                    outcome.append(sandbox.exec("echo started; sleep 60", timeout=90))
                except BaseException as exc:  # reported below
                    outcome.append(exc)

            worker = threading.Thread(target=run)
            worker.start()
            time.sleep(1.5)
            sandbox.backend.stop()  # the sandbox dies under the running command
            worker.join(60)
            assert not worker.is_alive()
            assert len(outcome) == 1
            assert isinstance(outcome[0], SandboxGoneError), outcome[0]
            assert not sandbox.is_alive()
            with pytest.raises(SandboxGoneError):
                sandbox.exec("echo after")
        finally:
            sandbox.close()

    def test_check_raises_typed_errors(self, sandbox: SandboxRuntime) -> None:
        with pytest.raises(CommandFailedError) as failed:
            sandbox.exec("echo boom >&2; exit 7", check=True)
        assert failed.value.result.exit_code == 7
        assert "boom" in str(failed.value)
        with pytest.raises(SandboxTimeoutError) as timed_out:
            sandbox.exec("echo partial; sleep 30", timeout=1, check=True)
        assert timed_out.value.result is not None
        assert timed_out.value.result.stdout == "partial\n"
        assert isinstance(timed_out.value, TimeoutError)

    def test_concurrent_exec_from_threads(self, sandbox: SandboxRuntime) -> None:
        outputs: dict[int, str] = {}
        errors: list[BaseException] = []

        def work(index: int) -> None:
            try:
                outputs[index] = sandbox.exec(f"sleep 0.2; echo {index}").stdout
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)

        threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert not errors
        assert outputs == {i: f"{i}\n" for i in range(8)}

    # -- files -----------------------------------------------------------------------------

    def test_text_round_trip_creates_parents(self, sandbox: SandboxRuntime) -> None:
        sandbox.write_text("deep/er/file.txt", "héllo\nwörld\n")
        assert sandbox.read_text("deep/er/file.txt") == "héllo\nwörld\n"
        assert sandbox.exec("cat deep/er/file.txt").stdout == "héllo\nwörld\n"

    def test_bytes_round_trip_every_byte(self, sandbox: SandboxRuntime) -> None:
        data = bytes(range(256)) * 64
        sandbox.write_bytes("blob.bin", data)
        assert sandbox.read_bytes("blob.bin") == data
        assert sandbox.exec("wc -c < blob.bin").stdout.strip() == str(len(data))

    def test_overwrite_replaces_content(self, sandbox: SandboxRuntime) -> None:
        sandbox.write_text("f.txt", "a much longer first version\n")
        sandbox.write_text("f.txt", "short\n")
        assert sandbox.read_text("f.txt") == "short\n"

    def test_file_mode_is_applied(self, sandbox: SandboxRuntime) -> None:
        sandbox.write_text("run.sh", "#!/bin/sh\necho ran\n", mode=0o755)
        assert sandbox.exec("./run.sh").stdout == "ran\n"

    def test_command_output_is_readable(self, sandbox: SandboxRuntime) -> None:
        sandbox.exec("mkdir -p out && printf 'made' > out/made.txt", check=True)
        assert sandbox.read_text("out/made.txt") == "made"

    def test_missing_file_and_directory_errors(self, sandbox: SandboxRuntime) -> None:
        with pytest.raises(SandboxFileNotFoundError):
            sandbox.read_text("nope.txt")
        with pytest.raises(FileNotFoundError):  # the builtin, for code that knows only it
            sandbox.read_bytes("nope/deeper.txt")
        sandbox.write_text("adir/x.txt", "x")
        with pytest.raises(SandboxIsADirectoryError):
            sandbox.read_text("adir")

    def test_exists(self, sandbox: SandboxRuntime) -> None:
        sandbox.write_text("there.txt", "1")
        assert sandbox.exists("there.txt")
        assert not sandbox.exists("absent.txt")

    def test_stat_describes_files_dirs_and_symlinks(self, sandbox: SandboxRuntime) -> None:
        sandbox.write_text("d/a.txt", "hello", mode=0o640)
        sandbox.exec("ln -s a.txt d/link && ln -s missing d/broken", check=True)
        info = sandbox.stat("d/a.txt")
        assert (info.name, info.type, info.size, info.mode) == ("a.txt", "file", 5, 0o640)
        assert info.path == sandbox.resolve("d/a.txt")
        assert info.mtime > time.time() - 3600
        directory = sandbox.stat("d")
        assert directory.is_dir
        assert directory.mode & 0o700 == 0o700
        link = sandbox.stat("d/link")
        assert (link.type, link.symlink_target) == ("symlink", "a.txt")
        assert sandbox.stat("d/broken").symlink_target == "missing"
        with pytest.raises(SandboxFileNotFoundError):
            sandbox.stat("d/nope")

    def test_list_dir_returns_every_entry_sorted(self, sandbox: SandboxRuntime) -> None:
        names = ["b.txt", ".hidden", "a dir", "ünï", "new\nline"]
        for name in names:
            sandbox.write_text(f"listing/{name}/x" if name == "a dir" else f"listing/{name}", "x")
        entries = sandbox.list_dir("listing")
        assert [e.name for e in entries] == sorted(names)
        kinds = {e.name: e.type for e in entries}
        assert kinds["a dir"] == "dir"
        assert kinds["b.txt"] == "file"
        assert all(e.path == sandbox.resolve(f"listing/{e.name}") for e in entries)
        assert sandbox.list_dir("listing/a dir")[0].name == "x"
        with pytest.raises(SandboxNotADirectoryError):
            sandbox.list_dir("listing/b.txt")
        with pytest.raises(SandboxFileNotFoundError):
            sandbox.list_dir("nowhere")

    def test_make_dir_and_remove(self, sandbox: SandboxRuntime) -> None:
        sandbox.make_dir("m/n/o")
        sandbox.make_dir("m/n/o")  # already there: fine
        assert sandbox.stat("m/n/o").is_dir
        sandbox.write_text("m/n/o/f.txt", "x")
        with pytest.raises(SandboxNotADirectoryError):
            sandbox.make_dir("m/n/o/f.txt")
        with pytest.raises(SandboxIsADirectoryError):
            sandbox.remove("m/n")
        sandbox.remove("m/n/o/f.txt")
        assert not sandbox.exists("m/n/o/f.txt")
        sandbox.remove("m/n/o/f.txt")  # already gone: fine
        sandbox.remove("m", recursive=True)
        assert not sandbox.exists("m")
        assert sandbox.exec("echo ok").stdout == "ok\n"

    def test_remove_never_follows_a_symlink(self, sandbox: SandboxRuntime) -> None:
        sandbox.write_text("keep/data.txt", "precious")
        sandbox.exec("ln -s keep alias", check=True)
        sandbox.remove("alias", recursive=True)
        assert not sandbox.exists("alias")
        assert sandbox.read_text("keep/data.txt") == "precious"

    def test_paths_climbing_above_root_are_refused(self, sandbox: SandboxRuntime) -> None:
        depth = sandbox.workdir.count("/") + 1
        escape = "../" * depth + "etc/escaped"
        with pytest.raises(PathEscapeError):
            sandbox.write_text(escape, "no")
        with pytest.raises(PathEscapeError):
            sandbox.read_text(escape)

    def test_upload_and_download_directory(self, sandbox: SandboxRuntime, tmp_path: Path) -> None:
        source = tmp_path / "src"
        (source / "pkg" / "sub").mkdir(parents=True)
        (source / "pkg" / "__init__.py").write_text("X = 1\n")
        (source / "pkg" / "sub" / "data.bin").write_bytes(b"\x00\x01\xff")
        (source / "top.txt").write_text("top\n")
        sandbox.upload(source, "project")
        listing = sandbox.exec("find project -type f | sort").stdout.split()
        assert listing == ["project/pkg/__init__.py", "project/pkg/sub/data.bin", "project/top.txt"]
        back = tmp_path / "back"
        sandbox.download("project", back)
        assert (back / "pkg" / "__init__.py").read_text() == "X = 1\n"
        assert (back / "pkg" / "sub" / "data.bin").read_bytes() == b"\x00\x01\xff"
        assert (back / "top.txt").read_text() == "top\n"

    def test_large_upload_and_download_travel_in_pieces(
        self, sandbox: SandboxRuntime, tmp_path: Path
    ) -> None:
        # Larger than one transfer piece (8 MiB): the chunked paths, byte for byte.
        blob = os.urandom(3 * 1024 * 1024) * 7  # 21 MiB, random enough to defeat compression
        source = tmp_path / "tree"
        (source / "data").mkdir(parents=True)
        (source / "data" / "big.bin").write_bytes(blob)
        (source / "small.txt").write_text("small\n")
        sandbox.upload(source, "tree")
        assert sandbox.stat("tree/data/big.bin").size == len(blob)
        sandbox.upload(source / "data" / "big.bin", "single.bin")
        sandbox.download("tree", tmp_path / "back")
        sandbox.download("single.bin", tmp_path / "single.bin")
        assert (tmp_path / "back" / "data" / "big.bin").read_bytes() == blob
        assert (tmp_path / "back" / "small.txt").read_text() == "small\n"
        assert (tmp_path / "single.bin").read_bytes() == blob
        assert sandbox.exec(
            "ls /tmp/.sandbox-runtime/transfers 2>/dev/null | wc -l"
        ).stdout.strip() in (
            "0",
            "",
        )

    def test_download_keeps_nothing_that_gains_privileges(
        self, sandbox: SandboxRuntime, tmp_path: Path
    ) -> None:
        # The sandbox as the adversary: a setuid copy of its shell, a raw disk node and a
        # FIFO (where its user may make them), a link out to /etc, a hard link.
        sandbox.exec(
            "mkdir -p evil && cp /bin/sh evil/sh && chmod 4755 evil/sh && ln evil/sh evil/sh2"
            " && ln -s /etc evil/etc && echo data > evil/data && chmod 6644 evil/data",
            check=True,
        )
        sandbox.exec("mknod evil/loop b 7 0 && chmod 666 evil/loop; mkfifo evil/fifo")
        back = tmp_path / "back"
        sandbox.download("evil", back)
        assert sorted(p.name for p in back.iterdir()) == ["data", "etc", "sh", "sh2"]
        assert (back / "sh").stat().st_mode & 0o7777 == 0o755
        assert (back / "data").stat().st_mode & 0o7777 == 0o644
        assert os.readlink(back / "etc") == "/etc"  # kept as a link, never followed
        for name in ("sh", "data"):
            assert (back / name).stat().st_uid == os.getuid()

    def test_download_of_a_symlink_is_a_sandbox_error(
        self, sandbox: SandboxRuntime, tmp_path: Path
    ) -> None:
        sandbox.exec("ln -s /etc evil-link", check=True)
        with pytest.raises(SandboxError):  # a link out of the sandbox: which error is the backend's
            sandbox.download("evil-link", tmp_path / "copy")
        assert not (tmp_path / "copy").exists()

    def test_an_argument_vector_longer_than_one_argument_runs(
        self, sandbox: SandboxRuntime
    ) -> None:
        # Quoted as one shell text, two 100 KB words exceed Linux's 128 KiB for one argument
        # ("Argument list too long"); each word alone is within it.
        words = ["a" * 100_000, "b'c" * 30_000]
        result = sandbox.exec(["sh", "-c", 'printf "%s\\n" "${#1}" "${#2}"', "sh", *words])
        assert result.exit_code == 0, result.stderr[-300:]
        assert result.stdout.split() == ["100000", "90000"]

    def test_download_of_odd_files_arrives_whole(
        self, sandbox: SandboxRuntime, tmp_path: Path
    ) -> None:
        # A file that is all hole (no data at all), and a name that is not UTF-8, both
        # alone and in a tree.  Once a raw tarfile.ReadError on local, and "no such file"
        # on the native docker path (the name mangled crossing the engine's JSON API).
        sandbox.exec(
            "mkdir -p odd && truncate -s 1M odd/hole && printf x > \"odd/$(printf 'n\\377me')\"",
            check=True,
        )
        odd_name = os.fsdecode(b"n\xffme")
        sandbox.download("odd", tmp_path / "tree")
        assert (tmp_path / "tree" / "hole").read_bytes() == bytes(1 << 20)
        assert (tmp_path / "tree" / odd_name).read_bytes() == b"x"
        sandbox.download(f"odd/{odd_name}", tmp_path / "single")
        assert (tmp_path / "single").read_bytes() == b"x"
        sandbox.download("odd/hole", tmp_path / "hole")
        assert (tmp_path / "hole").stat().st_size == 1 << 20

    def test_download_attack_corpus_escapes_nothing_and_never_hangs(
        self, sandbox: SandboxRuntime, tmp_path: Path
    ) -> None:
        # Links out of the tree, a FIFO and a socket (a download must neither open nor
        # keep them), and a 20 GiB file of holes (it must not become 20 GiB on the host).
        sandbox.exec(
            "mkdir -p corpus/sub && ln -s /etc corpus/x && ln -s ../../.. corpus/y"
            " && ln -s ../../../../etc/passwd corpus/sub/z && echo kept > corpus/sub/data"
            " && ln corpus/sub/data corpus/hard && mkfifo corpus/fifo"
            " && truncate -s 20G corpus/big && printf tail >> corpus/big",
            check=True,
        )
        sandbox.exec(
            "cd corpus && python3 -c 'import socket; socket.socket(socket.AF_UNIX).bind(\"sock\")'"
        )
        # A hard link to a file outside the tree, where the filesystem allows one.
        sandbox.exec("ln /etc/debian_version corpus/hard-out || ln /etc/hostname corpus/hard-out")
        linked_out = sandbox.exists("corpus/hard-out")
        back = tmp_path / "host" / "back"
        started = time.monotonic()
        sandbox.download("corpus", back)
        assert time.monotonic() - started < 120
        assert [p.name for p in back.parent.iterdir()] == ["back"]  # nothing beside it
        names = ["big", "hard", *(["hard-out"] if linked_out else []), "sub", "x", "y"]
        assert sorted(p.name for p in back.iterdir()) == names
        if linked_out:  # a copy of its own, linked to nothing on the host
            assert (back / "hard-out").is_file()
            assert (back / "hard-out").stat().st_nlink == 1
        assert os.readlink(back / "x") == "/etc"  # links arrive as links, never followed
        assert os.readlink(back / "y") == "../../.."
        assert os.readlink(back / "sub" / "z") == "../../../../etc/passwd"
        assert (back / "hard").read_text() == "kept\n"
        big = back / "big"
        assert big.stat().st_size == 20 * 2**30 + 4
        assert big.stat().st_blocks * 512 < 64 * 2**20  # kept sparse: no 20 GiB on the host
        with big.open("rb") as handle:
            handle.seek(20 * 2**30)
            assert handle.read() == b"tail"
        with pytest.raises(SandboxError):  # a FIFO as the root: refused, never opened
            sandbox.download("corpus/fifo", tmp_path / "host" / "fifo")
        assert not (tmp_path / "host" / "fifo").exists()

    def test_upload_keeps_nothing_that_gains_privileges(
        self, sandbox: SandboxRuntime, tmp_path: Path
    ) -> None:
        tree = tmp_path / "up"
        (tree / "shared").mkdir(parents=True)
        (tree / "shared").chmod(0o3777)
        (tree / "suid").write_text("#!/bin/sh\necho hi\n")
        if os.geteuid() == 0:  # a host owner, which must not follow the file in
            os.chown(tree / "suid", 4321, 4321)
        (tree / "suid").chmod(0o4755)
        os.mkfifo(tree / "fifo")
        os.symlink("/etc", tree / "out")
        os.symlink("../../..", tree / "up")
        listener = socket.socket(socket.AF_UNIX)
        try:
            listener.bind(str(tree / "sock"))
            sandbox.upload(tree, "uploaded")
            sandbox.upload(tree / "suid", "single-suid")
        finally:
            listener.close()
        user = sandbox.exec("id -u", check=True).stdout.strip()
        listing = sandbox.exec(
            "stat -c '%n %a %u %F' -- uploaded/* single-suid", check=True
        ).stdout.splitlines()
        found = {line.split()[0]: line.split()[1:] for line in listing}
        assert sorted(found) == [
            "single-suid",
            "uploaded/out",
            "uploaded/shared",
            "uploaded/suid",
            "uploaded/up",
        ]  # no FIFO, no socket
        for name in ("single-suid", "uploaded/suid"):
            assert found[name][:2] == ["755", user]  # no setuid bit, the sandbox user's
        assert found["uploaded/shared"][:2] == ["777", user]  # no setgid or sticky bit
        assert found["uploaded/out"][2:] == ["symbolic", "link"]
        with pytest.raises(SandboxError, match="fifo"):  # a FIFO itself: refused, not opened
            sandbox.upload(tree / "fifo", "fifo")
        assert sandbox.exec("readlink uploaded/out").stdout.strip() == "/etc"
        assert sandbox.exec("readlink uploaded/up").stdout.strip() == "../../.."

    def test_upload_and_download_file(self, sandbox: SandboxRuntime, tmp_path: Path) -> None:
        source = tmp_path / "tool.sh"
        source.write_text("#!/bin/sh\necho tool\n")
        source.chmod(0o755)
        sandbox.upload(source, "bin/tool.sh")
        assert sandbox.exec("bin/tool.sh").stdout == "tool\n"
        target = tmp_path / "out" / "copy.sh"
        sandbox.download("bin/tool.sh", target)
        assert target.read_text() == "#!/bin/sh\necho tool\n"

    def test_absolute_paths_agree_between_files_and_commands(self, sandbox: SandboxRuntime) -> None:
        if self.shares_absolute_paths:
            sandbox.write_text("/tmp/sr-abs/f.txt", "abs")
            assert sandbox.exec("cat /tmp/sr-abs/f.txt").stdout == "abs"
            assert sandbox.exec("pwd").stdout.strip() == sandbox.workdir
        else:
            # Documented: commands see the host path of the workdir, which ends with it.
            assert sandbox.exec("pwd").stdout.strip().endswith(sandbox.workdir)
            assert sandbox.exec("pwd").stdout.strip() != sandbox.workdir

    # -- repositories ------------------------------------------------------------------------

    def test_apply_patch_diff_and_reset(self, repo: SandboxRuntime) -> None:
        base = repo.base_commit()
        patch = (
            "--- a/src/app.py\n+++ b/src/app.py\n@@ -1,2 +1,2 @@\n"
            " def answer():\n-    return 41\n+    return 42\n"
        )
        result = repo.apply_patch(patch)
        assert result.applied, result.message
        assert result.files == ("src/app.py",)
        assert "return 42" in repo.read_text("src/app.py")
        repo.write_text("new_file.py", "NEW = True\n")
        diff = repo.diff()
        assert "+    return 42" in diff
        assert "new_file.py" in diff
        # The diff applies to a clean checkout: reset, then re-apply it.
        repo.reset()
        assert "return 41" in repo.read_text("src/app.py")
        assert not repo.exists("new_file.py")
        assert repo.diff() == ""
        assert repo.apply_patch(diff).applied
        assert repo.read_text("new_file.py") == "NEW = True\n"
        assert repo.base_commit() == base

    def test_patch_that_does_not_apply_changes_nothing(self, repo: SandboxRuntime) -> None:
        bad = (
            "--- a/src/app.py\n+++ b/src/app.py\n@@ -1,2 +1,2 @@\n"
            " def something_else():\n-    return 7\n+    return 8\n"
        )
        result = repo.apply_patch(bad)
        assert not result.applied
        assert result.message
        assert repo.read_text("src/app.py") == "def answer():\n    return 41\n"
        assert repo.diff() == ""

    def test_diff_sees_committed_changes_against_base(self, repo: SandboxRuntime) -> None:
        base = repo.base_commit()
        repo.write_text("src/app.py", "def answer():\n    return 43\n")
        repo.exec(f"{_GIT} commit -qam 'agent commit'", check=True)
        assert "+    return 43" in repo.diff()
        assert repo.base_commit() == base
        assert repo.base_commit(refresh=True) != base
        assert repo.diff() == ""

    def test_diff_sees_same_size_edit_in_the_same_second(self, repo: SandboxRuntime) -> None:
        # Same size and (likely) the same second as the commit: only git's racy-clean check
        # can see this change, so the diff must not disturb the index's timestamps.
        repo.exec(f"{_GIT} commit -q --allow-empty -m touch-index", check=True)
        repo.write_text("src/app.py", "def answer():\n    return 14\n")
        assert "+    return 14" in repo.diff()

    def test_diff_keeps_binary_changes(self, repo: SandboxRuntime) -> None:
        repo.write_bytes("image.bin", bytes(range(256)))
        diff = repo.diff()
        assert "GIT binary patch" in diff
        repo.reset()
        assert repo.apply_patch(diff).applied
        assert repo.read_bytes("image.bin") == bytes(range(256))

    # -- lifecycle ---------------------------------------------------------------------------

    def test_list_and_connect_from_another_client(self, sandbox_config: SandboxConfig) -> None:
        tag = uuid.uuid4().hex
        config = sandbox_config.model_copy(update={"labels": {"conformance-run": tag}})
        backend_cls = load_backend(config.backend)
        options = config.options
        if Capability.RECONNECT not in backend_cls.capabilities_for(
            backend_cls.options_model.model_validate(options)
            if isinstance(options, dict)
            else options
        ):
            with pytest.raises(ConfigError):
                SandboxRuntime.connect(config.backend, "any", options=options)
            return
        with SandboxRuntime(config) as original:
            original.write_text("note.txt", "left by the first client")
            found = list_sandboxes(config.backend, labels={"conformance-run": tag}, options=options)
            assert [info.sandbox_id for info in found] == [original.id]
            info = found[0]
            assert info.labels == {"conformance-run": tag}
            assert info.workdir == original.workdir
            assert info.created_at is not None
            assert info.expires_at is not None
            assert info.expires_at > info.created_at
            other = SandboxRuntime.connect(config.backend, original.id, options=options)
            assert other.workdir == original.workdir
            assert other.read_text("note.txt") == "left by the first client"
            assert other.exec("cat note.txt").stdout == "left by the first client"
            other.close()
            assert not original.is_alive()
        assert (
            list_sandboxes(config.backend, labels={"conformance-run": tag}, options=options) == []
        )
        with pytest.raises(SandboxGoneError):
            SandboxRuntime.connect(config.backend, original.id, options=options)

    def test_close_is_idempotent_and_final(self, sandbox_config: SandboxConfig) -> None:
        sandbox = SandboxRuntime(sandbox_config).start()
        assert sandbox.is_alive()
        sandbox.close()
        sandbox.close()
        assert not sandbox.is_alive()
        with pytest.raises(SandboxClosedError):
            sandbox.exec("true")
        with pytest.raises(SandboxClosedError):
            sandbox.start()

    def test_two_sandboxes_are_isolated(self, sandbox_config: SandboxConfig) -> None:
        with SandboxRuntime(sandbox_config) as first, SandboxRuntime(sandbox_config) as second:
            first.write_text("only-here.txt", "1")
            assert not second.exists("only-here.txt")
            assert first.id != second.id

    def test_async_facade(self, sandbox_config: SandboxConfig) -> None:
        async def scenario() -> tuple[str, str, bool]:
            async with AsyncSandboxRuntime(sandbox_config) as sandbox:
                await sandbox.write_text("a.txt", "async")
                results = await asyncio.gather(
                    sandbox.exec("cat a.txt"), sandbox.exec("echo parallel")
                )
                return results[0].stdout, results[1].stdout, await sandbox.exists("a.txt")

        assert asyncio.run(scenario()) == ("async", "parallel\n", True)
