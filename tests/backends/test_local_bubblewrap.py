"""bubblewrap's own setup failures against the command's: the first are retried, never the second.

The failures are real: a wrapper around the real ``bwrap`` adds a bind of a missing path to the
next starts it is told to spoil, which bubblewrap refuses before the command runs, exactly as
it refuses a bind that races with the host's mounts (``Can't bind mount /oldroot/var ...``
while a Docker engine starts containers).
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from sandbox_runtime import BackendError, SandboxConfig, SandboxRuntime
from sandbox_runtime._core.results import ExecResult
from sandbox_runtime.backends.local._bubblewrap import SETUP_TRIES, Bubblewrap
from tests.conftest import bwrap_problem, require

# Counts each run of the command in the sandbox's own /tmp, then says it ran.
_COUNTED = "echo ran >> /tmp/runs; echo done"


def _spoiling_bwrap(tmp_path: Path) -> tuple[Path, Path]:
    """A bwrap that fails the setup of as many starts as its counter file says, then works."""
    real = shutil.which("bwrap")
    assert real is not None
    counter = tmp_path / "spoil"
    counter.write_text("0")
    wrapper = tmp_path / "spoiling-bwrap"
    wrapper.write_text(
        "#!/bin/sh\n"
        f'left=$(cat "{counter}")\n'
        'if [ "$left" -gt 0 ]; then\n'
        f'  echo $((left - 1)) > "{counter}"\n'
        f'  exec "{real}" --ro-bind /nonexistent-sandbox-runtime-test /x "$@"\n'
        "fi\n"
        f'exec "{real}" "$@"\n'
    )
    wrapper.chmod(0o755)
    return wrapper, counter


def _runtime(tmp_path: Path, bwrap: Path) -> SandboxRuntime:
    options = {"base_dir": tmp_path / "sandboxes", "isolation": "namespace"}
    options["bwrap_path"] = str(bwrap)
    return SandboxRuntime(SandboxConfig(backend="local", options=options))


def test_a_failed_setup_is_retried_and_the_command_runs_once(tmp_path: Path) -> None:
    require(bwrap_problem())
    bwrap, spoil = _spoiling_bwrap(tmp_path)
    with _runtime(tmp_path, bwrap) as sandbox:
        spoil.write_text(str(SETUP_TRIES - 1))
        result = sandbox.exec(_COUNTED)
        assert (result.exit_code, result.stdout) == (0, "done\n")
        assert sandbox.read_text("/tmp/runs") == "ran\n"
        assert spoil.read_text().strip() == "0"


def test_a_setup_that_keeps_failing_is_a_backend_error_not_an_exit_code(tmp_path: Path) -> None:
    require(bwrap_problem())
    bwrap, spoil = _spoiling_bwrap(tmp_path)
    with _runtime(tmp_path, bwrap) as sandbox:
        spoil.write_text(str(SETUP_TRIES))
        with pytest.raises(BackendError, match="Can't find source path"):
            sandbox.exec(_COUNTED)
        assert not sandbox.exists("/tmp/runs")


def test_a_command_that_fails_like_bubblewrap_runs_once(tmp_path: Path) -> None:
    require(bwrap_problem())
    bwrap, _ = _spoiling_bwrap(tmp_path)
    with _runtime(tmp_path, bwrap) as sandbox:
        result = sandbox.exec(
            f'{_COUNTED}; echo "bwrap: Can\'t bind mount /oldroot/var on /newroot/var" >&2; exit 1'
        )
        assert result.exit_code == 1
        assert sandbox.read_text("/tmp/runs") == "ran\n"


def _counted_starts(starts: list[list[str]]) -> Callable[[list[str], tuple[int, ...]], ExecResult]:
    def start(argv: list[str], pass_fds: tuple[int, ...]) -> ExecResult:
        starts.append(argv)
        done = subprocess.run(argv, capture_output=True, check=False, pass_fds=pass_fds)
        return ExecResult("cmd", done.returncode, done.stdout, done.stderr)

    return start


def test_a_killed_start_or_a_cancelled_command_is_not_started_again() -> None:
    require(bwrap_problem())
    spoiled = ["bwrap", "--ro-bind", "/nonexistent-sandbox-runtime-test", "/x", "--", "true"]
    starts: list[list[str]] = []
    result = Bubblewrap.run(spoiled, _counted_starts(starts), cancelled=lambda: True)
    assert (result.exit_code, len(starts)) == (1, 1)
    # A start ended by a signal (the kill of a timeout or of kill()) is the command's end.
    starts.clear()
    killed = ["bwrap", "--ro-bind", "/", "/", "--", "sh", "-c", "kill -9 $PPID"]
    result = Bubblewrap.run(killed, _counted_starts(starts))
    assert result.exit_code != 1
    assert len(starts) == 1


def test_bubblewrap_here_reports_its_commands_exit_status() -> None:
    """Without the report the retry is off; this machine's bubblewrap must give it."""
    require(bwrap_problem())
    assert Bubblewrap.problem("bwrap") == ""
    assert Bubblewrap.reports_status("bwrap")
