"""Register SWE tasks in rLLM's ``DatasetRegistry``, with the files verl needs.

rLLM's trainers find data by name (``DatasetRegistry.load_dataset(name, split)``), and its
``register_dataset`` writes the ``<split>.parquet`` / ``<split>_verl.parquet`` pair from plain
rows with pandas.  For SWE rows that pair falls short (no ``data_source`` for verl, struct
columns parquet cannot store, mixed formats that do not read back), so :func:`register_tasks`
lets rLLM record the dataset (its registry file, its directory layout, its metadata) and then
writes both files with :func:`~sandbox_runtime.swe.parquet.write_rllm_parquet` in their place.
Works with rLLM 0.2 (``rllm/registry/dataset_registry.json``) and its later releases
(``~/.rllm/datasets/registry.json``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from sandbox_runtime.errors import ConfigError
from sandbox_runtime.swe.parquet import PromptMode, encode_rows, write_rllm_parquet, written_rows
from sandbox_runtime.swe.task import Task

__all__ = ["register_tasks"]


def register_tasks(
    name: str,
    tasks: Sequence[Task],
    *,
    split: str = "train",
    data_source: str | None = None,
    prompt: PromptMode = PromptMode.AGENT,
) -> tuple[Path, Path]:
    """Register ``tasks`` as rLLM dataset ``name`` / ``split``; returns the two files."""
    try:
        from rllm.data.dataset import DatasetRegistry
    except ImportError as exc:
        raise ConfigError(
            f"--register needs rLLM importable here (pip install rllm): {exc}"
        ) from exc
    rows, row_formats = written_rows(tasks)
    dataset = DatasetRegistry.register_dataset(name, encode_rows(rows, row_formats), split)
    verl_path = dataset.get_verl_data_path()
    if verl_path is None:
        raise ConfigError(f"rLLM registered {name!r} but names no verl file for split {split!r}")
    return write_rllm_parquet(
        tasks, Path(verl_path).parent, split=split, data_source=data_source, prompt=prompt
    )
