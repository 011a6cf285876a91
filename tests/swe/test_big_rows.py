"""Huge task rows: bounded memory, small trajectories, the whole row still reachable.

The end-to-end test runs ``sandbox-runtime run`` on the local backend with a task file
whose first row carries a 50 MiB problem statement, and measures the run's peak RSS from a
parent process (``RUSAGE_CHILDREN``) against the same run without the big field.
"""

from __future__ import annotations

import io
import json
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

from sandbox_runtime.errors import ConfigError
from sandbox_runtime.swe import _big_json
from sandbox_runtime.swe.agents import Budget
from sandbox_runtime.swe.agents.llm import LLMAgent, LLMConfig, task_prompt
from sandbox_runtime.swe.bigfields import (
    AGENT_TEXT_CHARS,
    cap_text,
    capped_row,
    issue_excerpt,
    trajectory_task,
)
from sandbox_runtime.swe.dataset import DatasetError, read_row_at, read_source
from sandbox_runtime.swe.replay import read_trajectories, tasks_of
from sandbox_runtime.swe.rows import parse_row
from sandbox_runtime.swe.samples import bundled_rows_path
from tests.swe.conftest import open_prepared
from tests.swe.fake_chat import FakeChat, tool_reply

MIB = 1024 * 1024
BIG = 50 * MIB
#: The run's peak RSS may grow by at most this many times the big row's size.  Measured:
#: 1.46x (the row once, plus the allocator's slack while its string grows); ``json.loads``
#: on the line's text gave 1.84x; before any of it, 3.8x (the whole file, its split lines,
#: the decoded text and the parsed row together).
RSS_GROWTH_BOUND = 1.75
#: A trajectories file of five tasks, one of them with the 50 MiB field (cut to 1 Mi chars).
TRAJECTORIES_BOUND = 3 * MIB

_MEASURE = (
    "import resource, subprocess, sys\n"
    "done = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
    "sys.stderr.write(done.stdout + done.stderr)\n"
    "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
    "sys.exit(done.returncode)\n"
)


def _bundled_rows(shape: str = "swebench") -> list[dict[str, Any]]:
    text = bundled_rows_path(shape).read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _task_file(path: Path, extra: int) -> Path:
    # R2E-Gym rows: graded in the agent's sandbox, with nothing imported after the rows are
    # read that would raise the baseline above the reading's own peak (swebench's harness).
    rows = _bundled_rows("r2e")
    unit = "The issue repeats. "
    rows[0]["problem_statement"] += unit * (extra // len(unit))
    with path.open("w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row) + "\n")
    return path


def _run_measured(tmp_path: Path, tasks: Path, name: str) -> tuple[int, Path]:
    """Peak RSS (KiB) of ``run`` on ``tasks``, and its trajectories file."""
    trajectories = tmp_path / f"{name}-trajectories.jsonl"
    env = dict(os.environ, TMPDIR=str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir(exist_ok=True)
    command = [sys.executable, "-m", "sandbox_runtime.cli", "run", str(tasks)]
    command += ["--backend", "local", "--agent", "oracle", "--quiet", "-j", "2"]
    command += ["--trajectories", str(trajectories)]
    done = subprocess.run(
        [sys.executable, "-c", _MEASURE, *command],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return int(done.stdout.strip().splitlines()[-1]), trajectories


def test_a_50_mib_row_runs_in_bounded_memory_and_writes_a_small_trajectory(
    tmp_path: Path,
) -> None:
    small = _task_file(tmp_path / "small.jsonl", 0)
    big = _task_file(tmp_path / "big.jsonl", BIG)
    row_size = big.stat().st_size - small.stat().st_size
    baseline_kib, _ = _run_measured(tmp_path, small, "small")
    peak_kib, trajectories = _run_measured(tmp_path, big, "big")
    growth = (peak_kib - baseline_kib) * 1024
    assert growth < RSS_GROWTH_BOUND * row_size, (
        f"peak RSS grew by {growth / MIB:.0f} MiB for a {row_size / MIB:.0f} MiB row "
        f"({growth / row_size:.2f}x; bound {RSS_GROWTH_BOUND}x)"
    )
    assert trajectories.stat().st_size < TRAJECTORIES_BOUND
    # records come in the order tasks finish: the big row's is the one from line 1
    records = sorted(read_trajectories(trajectories), key=lambda r: r["task"]["origin"]["line"])
    assert [record["reward"] for record in records] == [1.0] * 5
    first = records[0]["task"]
    assert first["origin"] == {"file": str(big.resolve()), "line": 1}
    assert [cut["field"] for cut in first["cut"]] == ["problem_statement"]
    assert first["cut"][0]["chars"] > BIG
    assert "characters cut here: problem_statement is" in first["row"]["problem_statement"]
    assert all("cut" not in record["task"] for record in records[1:])
    # replay gets the whole row back from the task file
    tasks = tasks_of(records)
    assert len(tasks[0].problem_statement) == first["cut"][0]["chars"]
    assert tasks[1].problem_statement == records[1]["task"]["row"]["problem_statement"]


def test_a_row_over_the_limit_is_one_error_and_the_others_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SANDBOX_RUNTIME_MAX_ROW_BYTES", "20000")
    rows = _bundled_rows()[:3]
    rows[1]["problem_statement"] = "x" * 30000
    path = tmp_path / "tasks.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows) + "not json\n")
    found = read_source(str(path))
    size = len(json.dumps(rows[1])) + 1
    assert found.errors == [
        f"{path}:2: the row is {size} bytes, over the limit of 20000 bytes "
        "($SANDBOX_RUNTIME_MAX_ROW_BYTES); skipped",
        f"{path}:4: not valid JSON: Expecting value (column 1)",
    ]
    assert found.labels == [f"{path}:1", f"{path}:3"]
    assert [row["instance_id"] for row in found.rows] == [
        rows[0]["instance_id"],
        rows[2]["instance_id"],
    ]
    with pytest.raises(DatasetError, match=r"tasks\.jsonl:2: the row is \d+ bytes, over the limit"):
        read_row_at(path, 2)
    assert read_row_at(path, 3)["instance_id"] == rows[2]["instance_id"]
    with pytest.raises(DatasetError, match=r"tasks\.jsonl:9: the file has fewer lines"):
        read_row_at(path, 9)
    with pytest.raises(DatasetError, match=r"tasks\.jsonl:0: lines are numbered from 1"):
        read_row_at(path, 0)


def test_a_bad_row_limit_setting_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SANDBOX_RUNTIME_MAX_ROW_BYTES", "lots")
    path = tmp_path / "tasks.jsonl"
    path.write_text("{}\n")
    with pytest.raises(DatasetError, match="SANDBOX_RUNTIME_MAX_ROW_BYTES='lots'"):
        read_source(str(path))


def test_capping_keeps_head_and_tail_and_says_how_much_was_cut() -> None:
    text = "H" * 600 + "M" * 1000 + "T" * 400
    kept, cut = cap_text(text, 1000, field="problem_statement")
    assert cut is not None
    assert cut.to_dict() == {
        "field": "problem_statement",
        "chars": 2000,
        "kept": 1000,
    }
    assert kept.startswith("H" * 500 + "\n[... 1000 characters cut here")
    assert kept.endswith("...]\n" + "M" * 100 + "T" * 400)
    short = "fits"
    assert cap_text(short, 1000, field="x") == (short, None)
    row: dict[str, Any] = {
        "a": "ok",
        "sandbox": {"r2e_ds": {"problem_statement": "y" * 5000}},
        "ids": ["z" * 3],
    }
    capped, cuts = capped_row(row, 1000)
    assert [c.field for c in cuts] == ["sandbox.r2e_ds.problem_statement"]
    assert capped["ids"] is row["ids"]  # untouched parts are shared, not copied
    assert row["sandbox"]["r2e_ds"]["problem_statement"] == "y" * 5000  # the task's row stays
    same, none = capped_row({"a": "ok"}, 1000)
    assert none == []
    assert same == {"a": "ok"}


def test_a_normal_row_is_recorded_whole_and_a_cut_one_needs_its_origin() -> None:
    row = _bundled_rows()[0]
    entry = trajectory_task("swebench", row, "")
    assert entry == {"format": "swebench", "row": row}
    row["problem_statement"] = "p" * 3000
    entry = trajectory_task("swebench", row, "hf:some/set#4", limit=1000)
    assert entry["origin"] == {"source": "hf:some/set#4"}
    record = {"task_id": row["instance_id"], "task": entry}
    with pytest.raises(ConfigError, match=r"record 0 \(.*\): its row was cut in the trajectory"):
        tasks_of([record])
    known = {row["instance_id"]: parse_row(row)}
    assert tasks_of([record], known)[0].problem_statement == "p" * 3000


def test_the_issue_a_model_gets_is_capped_and_the_trajectory_says_so() -> None:
    row = _bundled_rows()[0]
    body = "a" * AGENT_TEXT_CHARS + "b" * AGENT_TEXT_CHARS
    row["problem_statement"] = f"[ISSUE]\n{body}\n[/ISSUE]"
    task = parse_row(row)
    excerpt, cut = issue_excerpt(task.problem_statement)
    assert cut is not None
    assert cut.chars == len(body) + 2
    assert len(excerpt) < AGENT_TEXT_CHARS + 200
    assert excerpt.startswith("\n" + "a" * 1000)
    assert excerpt.endswith("b" * 1000 + "\n")
    prompt = task_prompt(task)
    assert "characters cut here: the issue is 200002 characters long" in prompt
    assert "[ISSUE]" not in prompt
    with FakeChat([tool_reply([("submit", {})])]) as chat, open_prepared(task) as sandbox:
        config = LLMConfig(base_url=chat.url, model="m", api_key=SecretStr("k"), max_retries=0)
        result = LLMAgent(config).run(task, sandbox, Budget(max_steps=3))
    sent = chat.requests[0]["messages"][1]["content"]
    assert len(sent) < AGENT_TEXT_CHARS + 400
    assert result.notes == [f"the issue sent to the model was cut: {cut.note()}"]


def _random_text(rng: random.Random, size: int) -> str:
    # escapes of every kind, raw and escaped non-ASCII, surrogate pairs, backslash runs
    alphabet = ["a"] * 20 + ["b", " ", '"', "\\", "\\\\", "\n", "\t", "é", "€", "😀", "中", "/"]
    return "".join(rng.choice(alphabet) for _ in range(size))


@pytest.mark.parametrize("seed", range(4))
def test_a_long_line_parsed_in_chunks_equals_json_loads(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Tiny chunks make every kind of cut happen: the value is always json.loads's."""
    rng = random.Random(seed)
    streamed = 0
    for _ in range(300):
        monkeypatch.setattr(_big_json, "_CHUNK", rng.choice([1, 2, 3, 5, 16, 64]))
        monkeypatch.setattr(_big_json, "BIG_STRING", rng.choice([0, 4, 50]))
        row = {
            "problem_statement": _random_text(rng, rng.randint(0, 400)),
            "nested": {"k": [_random_text(rng, 30), 7, None, True, 1.5]},
            _random_text(rng, 5): _random_text(rng, 200),
        }
        data = (json.dumps(row, ensure_ascii=rng.random() < 0.5) + "\n").encode()
        handle = io.BytesIO(b"before\n" + data + b"after\n")
        try:
            value = _big_json.load_big_line(handle, 7, len(data))
        except _big_json.NotStreamable:
            continue  # no safe cut in a tiny piece: the caller parses the line whole
        assert value == row
        assert handle.tell() == 7 + len(data)
        streamed += 1
    assert streamed > 150


@pytest.mark.parametrize(
    "line",
    [b'{"a": "open', b'{"a": 1,}', b'{"a": "\\x"}', b'{"a": "\xff"}', b'{"a": "t\tb"}', b"{} x"],
)
def test_a_long_line_that_is_not_json_is_left_to_the_ordinary_parser(
    line: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_big_json, "_CHUNK", 3)
    monkeypatch.setattr(_big_json, "BIG_STRING", 2)
    with pytest.raises(_big_json.NotStreamable):
        _big_json.load_big_line(io.BytesIO(line), 0, len(line))


def test_a_long_line_with_an_error_is_worded_as_any_other(tmp_path: Path) -> None:
    path = tmp_path / "tasks.jsonl"
    path.write_bytes(b'{"problem_statement": "' + b"x" * (17 * MIB) + b'", }\n{"a": 1}\n')
    found = read_source(str(path))
    assert found.errors == [
        f"{path}:1: not valid JSON: Expecting property name enclosed in "
        f"double quotes (column {17 * MIB + 27})"
    ]
    assert found.rows == [{"a": 1}]
