"""Bad input gets one line naming what is wrong, exit code 2, and no sandbox; good rows run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sandbox_runtime import ConfigError, SandboxConfig, SandboxRuntime
from sandbox_runtime.swe.dataset import load_rows


def _cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TMPDIR": str(tmp_path / "tmp")}  # local sandboxes live under it
    (tmp_path / "tmp").mkdir(exist_ok=True)
    return subprocess.run(
        [sys.executable, "-m", "sandbox_runtime.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )


def _one_line_usage_error(done: subprocess.CompletedProcess[str], fragment: str) -> None:
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("sandbox-runtime: ")
    assert fragment in lines[0]
    assert "Traceback" not in done.stderr


def _no_sandbox_left(tmp_path: Path) -> None:
    assert not list((tmp_path / "tmp").glob("sandbox-runtime-*/sbx-*"))


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["run", "bundled", "-j", "0"], "-j/--jobs: must be at least 1, got 0"),
        (["run", "bundled", "-j", "-3"], "must be at least 1, got -3"),
        (["run", "bundled", "--step-timeout", "-5"], "--step-timeout: must be a positive"),
        (["run", "bundled", "--test-timeout", "0"], "--test-timeout: must be a positive"),
        (["run", "bundled", "--backend", "dockr"], "no sandbox backend named 'dockr' (known:"),
        (["run", "bundled", "--agent", "wizard"], "wizard"),
        (["run", "bundled", "--format", "swebench-pro"], "no task format named 'swebench-pro'"),
        (["run", "bundled", "--backend-option", "nope=1"], "--backend-option: nope"),
        (["exec", "--backend", "dockr", "--", "true"], "no sandbox backend named 'dockr'"),
        (["exec", "--timeout", "-1", "--", "true"], "--timeout: must be a positive"),
        (["run", "no-such-file.jsonl"], "no such task file: no-such-file.jsonl"),
        (["run", "bundled", "--grade-in", "elsewhere"], "--grade-in: invalid choice"),
        (["run", "bundled", "--grading", "lax"], "--grading: invalid choice"),
        (
            ["run", "bundled", "--grading", "strict", "--grade-in", "same"],
            "--grading strict grades in a fresh sandbox; it cannot use --grade-in same",
        ),
        (["run", "bundled", "--price", "cheap"], "expected RATE or BACKEND=RATE"),
        (["run", "bundled", "--price", "ags=-1"], "a price cannot be negative"),
        (["replay", "no-such.jsonl"], "cannot read no-such.jsonl"),
        (["reap", "--backend", "dockr"], "no sandbox backend named 'dockr'"),
    ],
)
def test_bad_flags_fail_up_front_in_one_line(
    tmp_path: Path, args: list[str], fragment: str
) -> None:
    _one_line_usage_error(_cli(tmp_path, *args), fragment)
    _no_sandbox_left(tmp_path)


@pytest.mark.parametrize("flag", ["--report", "--trajectories"])
def test_an_unwritable_output_fails_before_the_run(tmp_path: Path, flag: str) -> None:
    missing_dir = tmp_path / "no" / "such" / "dir" / "out.json"
    _one_line_usage_error(_cli(tmp_path, "run", "bundled", flag, str(missing_dir)), flag)
    (tmp_path / "a-directory").mkdir()
    _one_line_usage_error(
        _cli(tmp_path, "run", "bundled", flag, str(tmp_path / "a-directory")), "is a directory"
    )
    _no_sandbox_left(tmp_path)


def test_bad_lines_are_named_and_the_good_rows_run(tmp_path: Path) -> None:
    good = load_rows("bundled:swebench")[:2]
    source = tmp_path / "tasks.jsonl"
    source.write_bytes(
        json.dumps(good[0]).encode()
        + b"\n{this is not json\n"
        + b'{"task_id": "latin1-\xe9"}\n'
        + b"[1, 2]\n"
        + json.dumps(good[1]).encode()
        + b"\n"
    )
    report = tmp_path / "report.json"
    done = _cli(tmp_path, "run", str(source), "--quiet", "--report", str(report))
    assert done.returncode == 0, done.stderr
    assert f"{source}:2: not valid JSON" in done.stderr
    assert f"{source}:3: not UTF-8 (byte 0xe9 at column 21)" in done.stderr
    assert f"{source}:4: a row must be a JSON object, not list" in done.stderr
    document = json.loads(report.read_text())
    assert document["summary"]["tasks"] == 2
    assert document["summary"]["resolved"] == 2
    assert len(document["skipped_rows"]) == 3


def test_backend_options_take_json_values(tmp_path: Path) -> None:
    # A list for a list option: on local, base_dir is a path and isolation a string; an
    # option that takes a table or list is typed by JSON (docker's volumes).
    done = _cli(
        tmp_path,
        "run",
        "bundled",
        "--backend",
        "docker",
        "--backend-option",
        'volumes=["/tmp:/hosttmp:ro"]',
        "--backend-option",
        "volumes=notalist",
        "--limit",
        "1",
    )
    _one_line_usage_error(done, "volumes")
    done = _cli(tmp_path, "run", "bundled", "--backend-option", "isolation=[1")
    _one_line_usage_error(done, "not valid JSON")


@pytest.mark.parametrize("suffix", [".toml", ".yaml"])
def test_run_reads_its_flags_from_a_config_file(tmp_path: Path, suffix: str) -> None:
    report = tmp_path / "report.json"
    if suffix == ".toml":
        text = (
            f'tasks = ["bundled:r2e"]\nagent = "null"\njobs = 2\nlimit = 2\nquiet = true\n'
            f'report = "{report}"\n[backend-option]\nbase_dir = "{tmp_path / "boxes"}"\n'
        )
    else:
        text = (
            f"tasks: [bundled:r2e]\nagent: 'null'\njobs: 2\nlimit: 2\nquiet: true\n"
            f"report: {report}\nbackend_option: {{base_dir: {tmp_path / 'boxes'}}}\n"
        )
    config = tmp_path / f"run{suffix}"
    config.write_text(text)
    done = _cli(tmp_path, "run", "--config", str(config), "--agent", "oracle")
    assert done.returncode == 0, done.stderr
    document = json.loads(report.read_text())
    assert document["agent"] == "oracle"  # the command line wins over the file
    assert document["summary"]["tasks"] == 2
    assert document["summary"]["resolved"] == 2
    bad = tmp_path / f"bad{suffix}"
    bad.write_text("jobz = 3\n" if suffix == ".toml" else "jobz: 3\n")
    _one_line_usage_error(_cli(tmp_path, "run", "--config", str(bad)), "unknown key 'jobz'")
    zero = tmp_path / f"zero{suffix}"
    zero.write_text("jobs = 0\n" if suffix == ".toml" else "jobs: 0\n")
    _one_line_usage_error(_cli(tmp_path, "run", "--config", str(zero)), "jobs: must be at least 1")
    where = tmp_path / f"where{suffix}"
    where.write_text('grade-in = "nowhere"\n' if suffix == ".toml" else "grade-in: nowhere\n")
    _one_line_usage_error(
        _cli(tmp_path, "run", "--config", str(where)),
        "grade-in: must be one of same, fresh, default",
    )


def test_version_and_debug(tmp_path: Path) -> None:
    from sandbox_runtime import __version__

    done = _cli(tmp_path, "--version")
    assert (done.returncode, done.stdout.strip()) == (0, f"sandbox-runtime {__version__}")
    done = _cli(tmp_path, "--debug", "run", "no-such-file.jsonl")
    assert done.returncode == 2
    assert "Traceback" in done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith("sandbox-runtime: no such task file")


def test_a_nul_byte_in_a_command_is_a_config_error(tmp_path: Path) -> None:
    config = SandboxConfig(backend="local", options={"base_dir": tmp_path / "boxes"})
    with SandboxRuntime(config) as sandbox:
        for command in ("echo a\0b", ["echo", "a\0b"]):
            with pytest.raises(ConfigError, match="NUL byte"):
                sandbox.exec(command)
        with pytest.raises(ConfigError, match="NUL byte"):
            sandbox.exec("true", env={"A": "x\0y"})
    with pytest.raises(ValueError, match="NUL byte"):
        SandboxConfig(env={"A": "x\0y"})
