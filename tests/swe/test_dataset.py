from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from sandbox_runtime.swe import Task, read_rows
from sandbox_runtime.swe.dataset import (
    DatasetError,
    load_rows,
    read_source,
    select_tasks,
    write_jsonl,
)
from tests.conftest import require
from tests.swe import rows_fixtures as fx


def test_jsonl_round_trip_keeps_rows_exactly(tmp_path: Path) -> None:
    rows = [fx.r2e_row(), fx.swebench_row(), fx.swesmith_row()]
    path = tmp_path / "tasks.jsonl"
    assert write_jsonl(rows, path) == 3
    assert load_rows(str(path)) == rows
    assert [t.source for t in read_rows(load_rows(str(path))).tasks] == rows


def test_json_file_with_one_row_or_many(tmp_path: Path) -> None:
    (tmp_path / "one.json").write_text(json.dumps(fx.swebench_row()))
    (tmp_path / "many.json").write_text(json.dumps([fx.swebench_row(), fx.r2e_row()]))
    assert len(load_rows(str(tmp_path / "one.json"))) == 1
    assert len(load_rows(str(tmp_path / "many.json"))) == 2


def test_bad_sources_raise_dataset_errors(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="no such task file"):
        load_rows(str(tmp_path / "missing.jsonl"))
    (tmp_path / "bad.jsonl").write_text('{"a": 1}\n{nope\n')
    found = read_source(str(tmp_path / "bad.jsonl"))
    assert found.rows == [{"a": 1}]
    assert found.labels == [f"{tmp_path / 'bad.jsonl'}:1"]
    assert len(found.errors) == 1
    assert "bad.jsonl:2: not valid JSON" in found.errors[0]
    with pytest.raises(DatasetError, match="unknown sample row shape"):
        load_rows("bundled:nope")


def test_select_sort_truncate(bundled_tasks: list[Task]) -> None:
    ids = [t.task_id for t in bundled_tasks]
    picked = select_tasks(bundled_tasks, ids=[ids[3], ids[1]])
    assert [t.task_id for t in picked] == [ids[1], ids[3]]
    ordered = select_tasks(bundled_tasks, sort_by_image=True, limit=4)
    assert [t.image for t in ordered] == sorted(t.image or "" for t in bundled_tasks)[:4]
    with pytest.raises(DatasetError, match="no task with id nope"):
        select_tasks(bundled_tasks, ids=["nope"])


def test_hugging_face_source_without_the_package(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "datasets", None)
    with pytest.raises(DatasetError, match=r"needs the datasets package: pip install"):
        load_rows("hf:R2E-Gym/R2E-Gym-Lite")
    with pytest.raises(DatasetError, match="R2E-Gym/R2E-Gym-Lite"):
        load_rows("R2E-Gym/R2E-Gym-Lite")  # owner/name that is not a file: a hub name


def test_hugging_face_source_when_the_hub_is_unreachable(monkeypatch: pytest.MonkeyPatch) -> None:
    try:
        import datasets  # noqa: F401
    except ImportError:  # pragma: no cover - fails in CI, skips elsewhere
        require("needs the datasets extra")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    with pytest.raises(DatasetError, match="unreachable or the dataset does not exist") as info:
        load_rows("hf:R2E-Gym/R2E-Gym-Lite:train")
    assert "split 'train'" in str(info.value)
