"""rLLM's and verl's parquet files for SWE tasks: rows of any format that survive the trip.

A parquet column has one type, task rows do not: a Graph Planner task's ``mounts: {}`` is a
struct with no fields (which parquet cannot store), and a file mixing R2E-Gym and SWE-bench
rows gets the union of their columns, so every row comes back with the other format's keys
set to null and its format can no longer be told by which keys it has.  Rows are therefore
stored *encoded*: values that a column can hold as they are stay as they are (strings,
numbers, lists of strings: what R2E-Gym and rLLM read straight from ``extra_info``), the
others are stored as JSON text, and one more key, :data:`ROW_MARKER`, records the row's own
keys, the JSON-encoded ones and the task format.  :func:`decode_row` undoes exactly that, and
:func:`~sandbox_runtime.swe.rows.parse_row` calls it, so ``SWEEnv.from_dict``,
``compute_score`` and ``sandbox-runtime run`` read every stored row as the row it was.

:func:`write_rllm_parquet` writes the pair rLLM's ``DatasetRegistry.register_dataset`` writes
(``<split>.parquet`` with the rows, ``<split>_verl.parquet`` for verl), with what verl also
needs: a ``data_source`` column (verl's reward managers index it), ``ability``, and a prompt
in one of two :class:`PromptMode` s.
"""

from __future__ import annotations

import enum
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from sandbox_runtime.errors import SandboxError
from sandbox_runtime.swe import formats
from sandbox_runtime.swe.bigfields import issue_excerpt
from sandbox_runtime.swe.task import Task

__all__ = [
    "ROW_MARKER",
    "PromptMode",
    "decode_row",
    "encode_rows",
    "issue_text",
    "patch_prompt",
    "verl_rows",
    "write_rllm_parquet",
    "written_rows",
]

#: The key of an encoded row that says how to decode it (JSON text, see the module docstring).
ROW_MARKER = "_sandbox_runtime_row"

#: What rLLM's agent trainer expects in ``prompt``: its agent writes the real one.
AGENT_PLACEHOLDER = [{"role": "user", "content": "placeholder"}]

PATCH_SYSTEM_PROMPT = (
    "You are a software engineer fixing an issue in a Python repository. Read the issue, "
    "decide which source files must change, and answer with the fix as one unified diff "
    "(paths relative to the repository root, as `git diff` prints them) in a ```diff block. "
    "Do not change the tests."
)


class PromptMode(str, enum.Enum):
    """What the verl file's ``prompt`` column holds."""

    AGENT = "agent"
    """rLLM agent training: a placeholder that rLLM's agent replaces with its own prompt."""
    PATCH = "patch"
    """Single-turn patch RL: the issue as chat messages; the answer is a diff for
    :func:`~sandbox_runtime.swe.patch_reward.compute_score`."""


class ParquetError(SandboxError):
    """Rows cannot be written as parquet (pyarrow missing, an unwritable directory)."""


# -- encoding ---------------------------------------------------------------------------


def _kind(value: Any) -> str | None:
    """The column kind a value can be stored as natively; ``None`` for a null."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float" if math.isfinite(value) else "json"
    if isinstance(value, str):
        return "str"
    if isinstance(value, list):
        kinds = {_kind(item) for item in value}
        if not kinds:
            return "list"
        if len(kinds) == 1 and next(iter(kinds)) in ("str", "int"):
            return f"list:{next(iter(kinds))}"
    return "json"


def _column_kind(values: Sequence[Any]) -> str:
    kinds = {kind for kind in map(_kind, values) if kind is not None}
    lists = {kind for kind in kinds if kind.startswith("list:")}
    if "list" in kinds and len(lists) <= 1:  # empty lists go with any one kind of list
        kinds.discard("list")
        kinds |= lists or {"list:str"}
    if not kinds:
        return "null"
    if len(kinds) > 1 or "json" in kinds:
        return "json"
    return next(iter(kinds))


def encode_rows(
    rows: Sequence[Mapping[str, Any]], row_formats: Sequence[str]
) -> list[dict[str, Any]]:
    """The rows as parquet can store them, each with its :data:`ROW_MARKER` (see above)."""
    keys = list(dict.fromkeys(key for row in rows for key in row))
    json_keys = {key for key in keys if _column_kind([row.get(key) for row in rows]) == "json"}
    encoded = []
    for row, row_format in zip(rows, row_formats, strict=True):
        stored = {
            key: json.dumps(value, ensure_ascii=False) if key in json_keys else value
            for key, value in row.items()
        }
        marker = {
            "format": row_format,
            "keys": list(row),
            "json": [key for key in row if key in json_keys],
        }
        stored[ROW_MARKER] = json.dumps(marker, separators=(",", ":"))
        encoded.append(stored)
    return encoded


def _plain(value: Any) -> Any:
    """Numpy arrays and scalars (what pandas and verl hand back) as Python values."""
    if hasattr(value, "tolist"):
        return _plain(value.tolist())
    if isinstance(value, list):
        return [_plain(item) for item in value]
    if isinstance(value, Mapping):
        return {str(key): _plain(item) for key, item in value.items()}
    return value


def decode_row(stored: Mapping[str, Any]) -> tuple[dict[str, Any], str | None]:
    """The row an encoded row was made from, and its task format.

    Keys that are not the row's own (the union of a mixed file's columns, or what verl and
    rLLM add to ``extra_info``: ``index``, ``num_turns``, env settings) are dropped.  A row
    without the marker (written by other tools) comes back as it is, format unknown.
    """
    raw = stored.get(ROW_MARKER)
    if not isinstance(raw, str):
        return {str(k): _plain(v) for k, v in stored.items() if k != ROW_MARKER}, None
    try:
        marker = json.loads(raw)
        keys, json_keys = list(marker["keys"]), set(marker["json"])
        row_format = marker.get("format")
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{ROW_MARKER} is damaged: {exc}") from None
    row = {}
    for key in keys:
        value = _plain(stored.get(key))
        if key in json_keys and isinstance(value, str):
            value = json.loads(value)
        row[key] = value
    return row, row_format if isinstance(row_format, str) else None


def written_rows(tasks: Sequence[Task]) -> tuple[list[dict[str, Any]], list[str]]:
    """The row each task's format writes for it, and those formats' names."""
    names = [task.row_format or task.format for task in tasks]
    rows = [
        dict(formats.load_format(name).write(task)) for name, task in zip(names, tasks, strict=True)
    ]
    return rows, names


# -- the verl side ----------------------------------------------------------------------


def issue_text(task: Task) -> str:
    """The issue as R2E-Gym hands it to agents.

    The text inside ``[ISSUE]...[/ISSUE]`` where the statement has those tags, else the whole
    statement; one over :data:`~sandbox_runtime.swe.bigfields.AGENT_TEXT_CHARS` characters
    is cut to its head and tail around a marker that says so.
    """
    return issue_excerpt(task.problem_statement)[0]


def patch_prompt(task: Task) -> list[dict[str, str]]:
    """The chat messages of single-turn patch RL for ``task``."""
    where = f"{task.repo} at commit {task.base_commit}" if task.base_commit else task.repo
    user = (
        f"Repository: {where} (checked out at {task.workdir}).\n\n"
        f"<issue>\n{issue_text(task).strip()}\n</issue>\n\n"
        "Write the patch that resolves the issue."
    )
    return [
        {"role": "system", "content": PATCH_SYSTEM_PROMPT},
        {"role": "user", "content": user},
    ]


def verl_rows(
    tasks: Sequence[Task],
    *,
    split: str = "train",
    data_source: str | None = None,
    prompt: PromptMode = PromptMode.AGENT,
) -> list[dict[str, Any]]:
    """The verl rows: ``data_source``, ``prompt``, ``ability``, ``reward_model``, ``extra_info``.

    ``extra_info`` is the encoded task row plus ``index`` and ``split`` (which verl's dataset
    reads), so rLLM's environments and :func:`compute_score` find the row in it.
    ``data_source`` defaults to ``sandbox-runtime/<format>``.
    """
    encoded = encode_rows(*written_rows(tasks))
    rows = []
    for index, (task, extra_info) in enumerate(zip(tasks, encoded, strict=True)):
        extra_info.setdefault("index", index)
        extra_info.setdefault("split", split)
        rows.append(
            {
                "data_source": data_source or f"sandbox-runtime/{task.format}",
                "prompt": AGENT_PLACEHOLDER if prompt is PromptMode.AGENT else patch_prompt(task),
                "ability": "swe",
                "reward_model": {"style": "rule", "ground_truth": task.task_id},
                "extra_info": extra_info,
            }
        )
    return rows


def write_rllm_parquet(
    tasks: Sequence[Task],
    directory: Path,
    *,
    split: str = "train",
    data_source: str | None = None,
    prompt: PromptMode = PromptMode.AGENT,
) -> tuple[Path, Path]:
    """Write ``<split>.parquet`` (the encoded rows) and ``<split>_verl.parquet``.

    ``directory`` plays the part of rLLM's ``<datasets dir>/<name>``.  Every row a task
    format writes (its :meth:`~sandbox_runtime.swe.formats.RowFormat.write`: a JSONL task
    with its ``r2e_ds_json`` entry embedded, so Ray workers elsewhere need no file) is stored.
    """
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError as exc:
        raise ParquetError(
            "writing parquet needs pyarrow: pip install 'sandbox-runtime-swe[datasets]'"
        ) from exc
    verl = verl_rows(tasks, split=split, data_source=data_source, prompt=prompt)
    plain_rows = []
    for row in verl:
        plain = {k: v for k, v in row["extra_info"].items() if k not in ("index", "split")}
        plain_rows.append(plain)
    try:
        directory.mkdir(parents=True, exist_ok=True)
        plain_path = directory / f"{split}.parquet"
        verl_path = directory / f"{split}_verl.parquet"
        pq.write_table(pa.Table.from_pylist(plain_rows, schema=_schema(plain_rows)), plain_path)
        pq.write_table(pa.Table.from_pylist(verl, schema=_verl_schema(verl)), verl_path)
    except OSError as exc:
        raise ParquetError(f"cannot write parquet into {directory}: {exc}") from exc
    return plain_path, verl_path


def _arrow_type(kind: str) -> Any:
    import pyarrow as pa

    return {
        "str": pa.string(),
        "int": pa.int64(),
        "float": pa.float64(),
        "bool": pa.bool_(),
        "list:str": pa.list_(pa.string()),
        "list:int": pa.list_(pa.int64()),
        "null": pa.string(),
        "json": pa.string(),
    }[kind]


def _fields(rows: Sequence[Mapping[str, Any]]) -> list[Any]:
    import pyarrow as pa

    keys = list(dict.fromkeys(key for row in rows for key in row))
    kinds = {key: _column_kind([row.get(key) for row in rows]) for key in keys}
    return [pa.field(key, _arrow_type(kind)) for key, kind in kinds.items()]


def _schema(rows: Sequence[Mapping[str, Any]]) -> Any:
    import pyarrow as pa

    return pa.schema(_fields(rows))


def _verl_schema(rows: Sequence[Mapping[str, Any]]) -> Any:
    import pyarrow as pa

    message = pa.struct([("role", pa.string()), ("content", pa.string())])
    return pa.schema(
        [
            ("data_source", pa.string()),
            ("prompt", pa.list_(message)),
            ("ability", pa.string()),
            ("reward_model", pa.struct([("style", pa.string()), ("ground_truth", pa.string())])),
            ("extra_info", pa.struct(_fields([row["extra_info"] for row in rows]))),
        ]
    )
