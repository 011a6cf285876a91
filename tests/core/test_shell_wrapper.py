"""The in-sandbox wrapper, run by this host's bash: what a command sees, and its process."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from sandbox_runtime._core.shell import NO_CWD_EXIT, TOKEN_VAR, new_token, wrapped_argv

BASH = shutil.which("bash")
pytestmark = pytest.mark.skipif(BASH is None, reason="needs bash")


def _run(
    command: str | tuple[str, ...], cwd: str = "/", **kwargs: str
) -> tuple[subprocess.CompletedProcess[str], int]:
    assert BASH is not None
    token = new_token()
    argv = wrapped_argv(command, cwd, token, BASH, **kwargs)
    process = subprocess.Popen(
        argv,
        env={**os.environ, TOKEN_VAR: token},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    stdout, stderr = process.communicate(timeout=30)
    return subprocess.CompletedProcess(argv, process.returncode, stdout, stderr), process.pid


def test_a_simple_command_replaces_the_wrapper_shell() -> None:
    # No fork: the command runs as the wrapper's own process, as under a plain ``bash -c``.
    done, pid = _run("sh -c 'echo $$'")
    assert int(done.stdout) == pid


def test_the_command_sees_a_clean_shell_in_its_directory(tmp_path: Path) -> None:
    done, _ = _run('echo "[$1][$2][$#][${__srt_command-unset}]"; pwd', cwd=str(tmp_path))
    assert done.stdout.splitlines() == ["[][][0][unset]", str(tmp_path)]


def test_lists_pipelines_here_documents_and_comments_run_as_written() -> None:
    text = "X=3; cat <<'EOF' | tr a b\naaa $X\nEOF\necho $((X + 1)) # a comment"
    assert _run(text)[0].stdout == "bbb $X\n4\n"


def test_a_syntax_error_is_the_shells_own_exit_2() -> None:
    done, _ = _run("echo (")
    assert done.returncode == 2
    assert "syntax error" in done.stderr


def test_a_missing_directory_and_the_marker_and_stdin_still_work(tmp_path: Path) -> None:
    done, _ = _run("true", cwd=str(tmp_path / "gone"))
    assert done.returncode == NO_CWD_EXIT
    stdin = tmp_path / "in"
    stdin.write_text("from a file\n")
    marker = tmp_path / "state" / "started"
    done, _ = _run("cat", stdin_file=str(stdin), started_marker=str(marker))
    assert done.stdout == "from a file\n"
    assert marker.exists()
    assert not stdin.exists()


def test_an_exit_code_and_an_argument_vector_pass_through() -> None:
    assert _run("exit 7")[0].returncode == 7
    assert _run(("printf", "%s|", "a b", "$HOME"))[0].stdout == "a b|$HOME|"
