"""rLLM's and verl's parquet files: every row format, mixed files, Graph Planner JSONL rows
with empty objects, verl's columns and prompts, and rows that survive pandas and datasets."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from sandbox_runtime.integrations.rllm import SWEEnv
from sandbox_runtime.swe import Task, read_rows
from sandbox_runtime.swe.dataset import load_rows, read_source
from sandbox_runtime.swe.parquet import (
    ROW_MARKER,
    PromptMode,
    decode_row,
    encode_rows,
    write_rllm_parquet,
)
from tests.swe import rows_fixtures as fx


def _graph_planner_row(tmp_path: Path) -> dict[str, Any]:
    """Seed 003's task shape: empty ``mounts``/``env`` and an entry file next to the JSONL."""
    entry = tmp_path / "entries" / "r2e_ds.json"
    entry.parent.mkdir(parents=True, exist_ok=True)
    entry.write_text(json.dumps(fx.r2e_row()))
    return fx.jsonl_row(ds_json="entries/r2e_ds.json")


def _tasks(rows: list[dict[str, Any]], base_dir: Path) -> list[Task]:
    read = read_rows(rows, base_dir=base_dir)
    assert not read.errors, read.errors
    return read.tasks


def _same_tasks(back: list[Task], tasks: list[Task]) -> None:
    """The same tasks: identity, format, what the agent sees and what grading reads."""
    assert [t.task_id for t in back] == [t.task_id for t in tasks]
    for got, want in zip(back, tasks, strict=True):
        assert (got.format, got.row_format, got.image, got.workdir) == (
            want.format,
            want.row_format,
            want.image,
            want.workdir,
        )
        assert got.problem_statement == want.problem_statement
        assert got.grading == want.grading
        assert got.gold_patch == want.gold_patch
        assert (got.env, got.mounts) == (want.env, want.mounts)


@pytest.mark.parametrize(
    "kinds",
    [["r2e"], ["swebench"], ["swesmith"], ["jsonl"], ["r2e", "swebench", "swesmith", "jsonl"]],
)
def test_every_format_and_mixed_files_read_back(tmp_path: Path, kinds: list[str]) -> None:
    made: dict[str, Callable[[], dict[str, Any]]] = {
        "r2e": fx.r2e_row,
        "swebench": fx.swebench_row,
        "swesmith": fx.swesmith_row,
        "jsonl": lambda: _graph_planner_row(tmp_path),
    }
    tasks = _tasks([made[kind]() for kind in kinds], tmp_path)
    plain, verl = write_rllm_parquet(tasks, tmp_path / "out")
    # The plain file as rows (ours), as pandas reads it (rLLM's Dataset.load_data), and the
    # verl file's extra_info as pyarrow, pandas and Hugging Face datasets (verl) hand it over.
    import datasets
    import pandas as pd

    readings = {
        "plain": read_source(str(plain)).rows,
        "plain/pandas": pd.read_parquet(plain).to_dict("records"),
        "verl": read_source(str(verl)).rows,
        "verl/pandas": [r["extra_info"] for r in pd.read_parquet(verl).to_dict("records")],
        "verl/datasets": [
            r["extra_info"] for r in datasets.load_dataset("parquet", data_files=str(verl))["train"]
        ],
    }
    for reading, rows in readings.items():
        back = read_rows(rows)
        assert not back.errors, (reading, back.errors)
        _same_tasks(back.tasks, tasks)
        # And through the environment rLLM builds from extra_info (plus its env_args).
        envs = [SWEEnv.from_dict({**row, "backend": "docker", "verbose": False}) for row in rows]
        assert [env.task.task_id for env in envs] == [t.task_id for t in tasks]
        assert {env.options.backend for env in envs} == {"docker"}


def test_graph_planner_entry_is_embedded_with_an_absolute_path(tmp_path: Path) -> None:
    [task] = _tasks([_graph_planner_row(tmp_path)], tmp_path)
    _, verl = write_rllm_parquet([task], tmp_path / "out")
    shutil.rmtree(tmp_path / "entries")  # a Ray worker elsewhere has no such file
    [record] = pq.read_table(verl).to_pylist()
    row, row_format = decode_row(record["extra_info"])
    assert row_format == "jsonl"
    assert row["sandbox"]["mounts"] == {}
    assert row["sandbox"]["env"] == {}
    assert row["sandbox"]["r2e_ds_json"] == str(tmp_path / "entries" / "r2e_ds.json")
    assert row["sandbox"]["r2e_ds"] == fx.r2e_row()
    [back] = _tasks([record["extra_info"]], Path("/nonexistent"))
    _same_tasks([back], [task])


def test_encoding_keeps_native_columns_native_and_is_exact() -> None:
    rows: list[dict[str, Any]] = [
        {"a": "x", "n": 1, "files": ["p.py"], "nested": {"k": []}, "mixed": ["t"]},
        {"a": None, "n": 2, "files": [], "nested": {}, "mixed": '["t"]', "only_here": 1.5},
    ]
    encoded = encode_rows(rows, ["one", "two"])
    assert encoded[0]["files"] == ["p.py"]  # what R2E-Gym and rLLM read straight away
    assert encoded[0]["n"] == 1
    assert encoded[0]["nested"] == '{"k": []}'  # a struct column would lose {} and its keys
    assert encoded[1]["mixed"] == '"[\\"t\\"]"'  # list in one row, text in another
    for stored, row, name in zip(encoded, rows, ["one", "two"], strict=True):
        union = {key: stored.get(key) for key in {*encoded[0], *encoded[1]}}
        assert decode_row({**union, "index": 7, "num_turns": 3}) == (row, name)
    assert json.loads(encoded[0][ROW_MARKER])["keys"] == list(rows[0])
    assert decode_row({"plain": 1}) == ({"plain": 1}, None)
    with pytest.raises(ValueError, match="damaged"):
        decode_row({ROW_MARKER: "{"})


def test_verl_columns_and_the_two_prompt_modes(tmp_path: Path) -> None:
    tasks = _tasks(load_rows("bundled:r2e")[:2] + load_rows("bundled:swebench")[:1], tmp_path)
    _, agent = write_rllm_parquet(tasks, tmp_path / "agent", split="test")
    _, patch = write_rllm_parquet(
        tasks, tmp_path / "patch", prompt=PromptMode.PATCH, data_source="swe-rl"
    )
    agent_rows = pq.read_table(agent).to_pylist()
    assert agent.name == "test_verl.parquet"
    assert [r["data_source"] for r in agent_rows] == [
        "sandbox-runtime/r2e",
        "sandbox-runtime/r2e",
        "sandbox-runtime/swebench",
    ]
    assert {r["ability"] for r in agent_rows} == {"swe"}
    assert agent_rows[0]["prompt"] == [{"role": "user", "content": "placeholder"}]
    assert agent_rows[0]["reward_model"] == {"style": "rule", "ground_truth": tasks[0].task_id}
    assert [r["extra_info"]["index"] for r in agent_rows] == [0, 1, 2]
    assert {r["extra_info"]["split"] for r in agent_rows} == {"test"}
    patch_rows = pq.read_table(patch).to_pylist()
    assert {r["data_source"] for r in patch_rows} == {"swe-rl"}
    system, user = patch_rows[0]["prompt"]
    assert system["role"] == "system"
    assert "unified diff" in system["content"]
    assert user["role"] == "user"
    assert "split_row drops the last field" in user["content"]
    assert "[ISSUE]" not in user["content"]


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sandbox_runtime.cli", *args],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def test_tasks_rllm_on_a_graph_planner_file_and_run_on_the_result(tmp_path: Path) -> None:
    """``tasks rllm`` takes seed 003's JSONL (mounts: {}, env: {}) and bundled rows mixed;
    ``run`` grades every row of the written parquet (oracle: all resolved)."""
    source = tmp_path / "tasks.jsonl"
    entry = tmp_path / "ds" / "pager.json"
    entry.parent.mkdir()
    [pager] = [r for r in load_rows("bundled:r2e") if r["repo_name"] == "pager"]
    entry.write_text(json.dumps(pager))
    planner = {
        "task_id": "planner-pager",
        "issue": "pages() is off by one",
        "sandbox": {"backend": "repoenv", "mounts": {}, "env": {}, "r2e_ds_json": "ds/pager.json"},
    }
    mixed = [planner, *load_rows("bundled:swebench")[:2]]
    source.write_text("".join(json.dumps(row) + "\n" for row in mixed))
    made = _cli("tasks", "rllm", str(source), "--out", str(tmp_path / "out"), "--prompt", "patch")
    assert made.returncode == 0, made.stderr
    assert "wrote 3 row(s)" in made.stderr
    verl = tmp_path / "out" / "train_verl.parquet"
    listed = _cli("tasks", "list", str(verl))
    assert listed.returncode == 0, listed.stderr
    assert "planner-pager" in listed.stdout
    report = tmp_path / "report.json"
    ran = _cli("run", str(verl), "--backend", "local", "--agent", "oracle", "--report", str(report))
    assert ran.returncode == 0, ran.stderr
    document = json.loads(report.read_text())
    assert {t["task_id"]: t["reward"] for t in document["tasks"]} == {
        "planner-pager": 1.0,
        **{t.task_id: 1.0 for t in _tasks(mixed[1:], tmp_path)},
    }


def test_register_needs_rllm(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from sandbox_runtime.cli import main

    monkeypatch.setitem(sys.modules, "rllm.data.dataset", None)  # rLLM not importable
    assert main(["tasks", "rllm", "bundled:r2e", "--register", "swe_bundled"]) == 2
    assert capsys.readouterr().err.startswith(
        "sandbox-runtime: --register needs rLLM importable here"
    )
    both = _cli("tasks", "rllm", "bundled", "--out", str(tmp_path), "--register", "x")
    assert both.returncode == 2
    assert "not allowed with argument" in both.stderr
