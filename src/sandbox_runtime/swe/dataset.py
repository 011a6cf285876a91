"""Dataset tools: load rows, pick and order them, write JSONL and rLLM's parquet pair.

Sources (:func:`load_rows`):

* ``bundled``, ``bundled:r2e``, ``bundled:swebench``: the samples shipped in the package;
* a local ``.json`` (one row or a list), ``.jsonl`` or ``.parquet`` file (parquet needs
  ``pyarrow``);
* ``hf:NAME[:SPLIT]`` (or a bare ``owner/name`` that is not a file): a Hugging Face dataset
  through ``datasets`` (``pip install 'sandbox-runtime-swe[datasets]'``).  Without the package,
  or without network access to the hub, :class:`DatasetError` says which.

Rows stored by :func:`~sandbox_runtime.swe.parquet.write_rllm_parquet` read back as the rows
they were (a ``_verl`` file's rows come from its ``extra_info``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from sandbox_runtime.errors import SandboxError
from sandbox_runtime.swe._big_json import NotStreamable, load_big_line
from sandbox_runtime.swe.samples import bundled_rows_path
from sandbox_runtime.swe.task import Task

__all__ = [
    "DEFAULT_MAX_ROW_BYTES",
    "DatasetError",
    "SourceRows",
    "load_rows",
    "max_row_bytes",
    "read_row_at",
    "read_source",
    "select_tasks",
    "write_jsonl",
]

Row = dict[str, Any]


class DatasetError(SandboxError):
    """A dataset source cannot be read (missing file, bad JSON, missing extra, no network)."""


@dataclass
class SourceRows:
    """What a task source held: the readable rows, where each came from, and the bad lines.

    One malformed or non-UTF-8 line costs that line only: it is reported (``FILE:LINE: why``)
    and every other row is kept.
    """

    rows: list[Row] = field(default_factory=list)
    labels: list[str] = field(default_factory=list)
    """``FILE:LINE`` (or ``SOURCE#INDEX``) of each row, for messages about it."""
    errors: list[str] = field(default_factory=list)

    def extend(self, other: SourceRows) -> None:
        """Append another source's rows, labels and errors."""
        self.rows += other.rows
        self.labels += other.labels
        self.errors += other.errors


#: The largest JSONL line read as a row (``$SANDBOX_RUNTIME_MAX_ROW_BYTES`` changes it): a
#: longer line is one ``FILE:LINE`` error, read past in chunks without being held.
DEFAULT_MAX_ROW_BYTES = 512 * 1024 * 1024
_SKIP_CHUNK = 1024 * 1024
#: Lines longer than this are parsed in chunks (:mod:`sandbox_runtime.swe._big_json`), so a
#: huge string is never held twice; shorter ones by ``json`` at once.
_CHUNKED_OVER = 16 * 1024 * 1024


def max_row_bytes() -> int:
    """The row size limit in force (the environment's, else :data:`DEFAULT_MAX_ROW_BYTES`)."""
    value = os.environ.get("SANDBOX_RUNTIME_MAX_ROW_BYTES", "")
    try:
        return int(value) if value.strip() else DEFAULT_MAX_ROW_BYTES
    except ValueError:
        raise DatasetError(
            f"SANDBOX_RUNTIME_MAX_ROW_BYTES={value!r}: not a number of bytes"
        ) from None


@dataclass
class _Line:
    """One line of a task file: where it is, its size, and its bytes if it is short."""

    start: int
    size: int
    """Bytes, the newline included."""
    raw: bytes | None = None
    """The bytes of a short line (taken, and so freed, by :func:`_parse_owned`)."""
    over_limit: bool = False


def _skip_rest_of_line(handle: IO[bytes]) -> tuple[int, bool]:
    """Read past the end of the current line in bounded chunks: bytes skipped, newline seen."""
    skipped = 0
    while True:
        chunk = handle.readline(_SKIP_CHUNK)
        skipped += len(chunk)
        if not chunk or chunk.endswith(b"\n"):
            return skipped, chunk.endswith(b"\n")


def _next_line(handle: IO[bytes], limit: int) -> _Line | None:
    """The next line: read if short, else only measured; ``None`` at the end of the file."""
    start = handle.tell()
    cap = min(limit, _CHUNKED_OVER) + 1
    raw = handle.readline(cap)
    if not raw:
        return None
    if len(raw) < cap or raw.endswith(b"\n"):
        return _Line(start, len(raw), raw)
    size = len(raw)
    del raw
    rest, newline = _skip_rest_of_line(handle)
    size += rest
    return _Line(start, size, over_limit=size - newline > limit)


def _as_row(value: Any, where: str) -> Row | str:
    if not isinstance(value, dict):
        return f"{where}: a row must be a JSON object, not {type(value).__name__}"
    return value


def _parse_owned(line: _Line, where: str) -> Row | str:
    """The row a short line holds, or why none (empty for a blank line).

    The line's bytes are taken from ``line`` and dropped once decoded, so they never sit
    beside the parsed row.
    """
    raw, line.raw = line.raw or b"", None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return f"{where}: not UTF-8 (byte 0x{raw[exc.start]:02x} at column {exc.start + 1})"
    finally:
        del raw
    if not text.strip():
        return ""
    try:
        return _as_row(json.loads(text), where)
    except json.JSONDecodeError as exc:
        return f"{where}: not valid JSON: {exc.msg} (column {exc.colno})"


def _row_of(handle: IO[bytes], line: _Line, where: str, limit: int) -> Row | str:
    """The row on ``line``, or why it holds none (empty for a blank line).

    A long line is parsed in chunks; one that cannot be (not valid JSON, no safe place to
    cut a string) is read whole and parsed as any other, which words its error.
    """
    if line.over_limit:
        return (
            f"{where}: the row is {line.size} bytes, over the limit of {limit} bytes "
            "($SANDBOX_RUNTIME_MAX_ROW_BYTES); skipped"
        )
    if line.raw is None:
        try:
            return _as_row(load_big_line(handle, line.start, line.size), where)
        except NotStreamable:
            handle.seek(line.start)
            line.raw = handle.read(line.size)
    return _parse_owned(line, where)


def _read_jsonl(path: Path) -> SourceRows:
    """The rows of a JSONL file, read one line at a time (never the whole file at once).

    A short line's bytes are dropped once decoded; a long one is parsed in chunks, so a
    huge row costs about its own size; a line over :func:`max_row_bytes` is reported and
    skipped, and the rows after it still load.
    """
    limit = max_row_bytes()
    found = SourceRows()
    try:
        handle = path.open("rb")
    except OSError as exc:
        raise DatasetError(f"cannot read {path}: {exc.strerror}") from None
    with handle:
        number = 0
        while (line := _next_line(handle, limit)) is not None:
            number += 1
            where = f"{path}:{number}"
            row = _row_of(handle, line, where, limit)
            if isinstance(row, str):
                found.errors += [row] if row else []
                continue
            found.rows.append(row)
            found.labels.append(where)
    return found


def read_row_at(path: Path, line: int) -> Row:
    """The row on line ``line`` (from 1) of a JSONL file, the lines before it skipped unread.

    How a trajectory whose copy of a huge row was cut gets the whole row back.  Raises
    :class:`DatasetError` naming the file and line when it is not there or not a row.
    """
    where = f"{path}:{line}"
    if line < 1:
        raise DatasetError(f"{where}: lines are numbered from 1")
    limit = max_row_bytes()
    try:
        with path.open("rb") as handle:
            for _ in range(line - 1):
                if not _skip_rest_of_line(handle)[0]:
                    raise DatasetError(f"{where}: the file has fewer lines")
            found = _next_line(handle, limit)
            if found is None:
                raise DatasetError(f"{where}: the file has fewer lines")
            row = _row_of(handle, found, where, limit)
    except OSError as exc:
        raise DatasetError(f"cannot read {path}: {exc.strerror}") from None
    if isinstance(row, str):
        raise DatasetError(row or f"{where}: a blank line")
    return row


def _numbered(source: str, rows: list[Row]) -> SourceRows:
    return SourceRows(rows=rows, labels=[f"{source}#{i}" for i in range(len(rows))])


def _read_parquet(path: Path) -> list[Row]:
    try:
        import pyarrow.parquet as pq
    except ImportError as exc:
        raise DatasetError(
            f"reading {path} needs pyarrow: pip install 'sandbox-runtime-swe[datasets]'"
        ) from exc
    rows: list[Row] = pq.read_table(path).to_pylist()
    if rows and {"prompt", "extra_info"} <= set(rows[0]):  # verl's file: the task is extra_info
        rows = [dict(row["extra_info"] or {}) for row in rows]
    return rows


def _read_hf(name: str, split: str) -> list[Row]:
    try:
        import datasets
    except ImportError as exc:
        raise DatasetError(
            f"loading the Hugging Face dataset {name!r} needs the datasets package: "
            "pip install 'sandbox-runtime-swe[datasets]'"
        ) from exc
    try:
        data = datasets.load_dataset(name, split=split)
    except Exception as exc:  # datasets raises many types for "not reachable / not found"
        raise DatasetError(
            f"cannot load the Hugging Face dataset {name!r} (split {split!r}): the hub is "
            f"unreachable or the dataset does not exist ({type(exc).__name__}: {exc})"
        ) from exc
    return [dict(row) for row in data]


def read_source(source: str, *, split: str = "train") -> SourceRows:
    """The rows of ``source`` (see the module docstring for the forms it takes).

    Raises :class:`DatasetError` when the source itself cannot be read (a missing file, a
    missing package, an unreachable hub); bad lines of a JSONL file are in ``errors``.
    """
    if source == "bundled":
        found = read_source("bundled:r2e")
        found.extend(read_source("bundled:swebench"))
        return found
    if source.startswith("bundled:"):
        try:
            return _read_jsonl(bundled_rows_path(source.split(":", 1)[1]))
        except ValueError as exc:
            raise DatasetError(str(exc)) from None
    if source.startswith("hf:"):
        name, _, hf_split = source[3:].partition(":")
        return _numbered(source, _read_hf(name, hf_split or split))
    path = Path(source).expanduser()
    if not path.exists():
        if "/" in source and not source.startswith((".", "/", "~")) and source.count("/") == 1:
            return _numbered(source, _read_hf(source, split))
        raise DatasetError(f"no such task file: {source}")
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        return _read_jsonl(path)
    if suffix == ".parquet":
        return _numbered(source, _read_parquet(path))
    if suffix == ".json":
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except UnicodeDecodeError as exc:
            raise DatasetError(f"{path}: not UTF-8 (byte offset {exc.start})") from None
        except json.JSONDecodeError as exc:
            raise DatasetError(
                f"{path}:{exc.lineno}: not valid JSON: {exc.msg} (column {exc.colno})"
            ) from None
        return _numbered(source, data if isinstance(data, list) else [data])
    raise DatasetError(f"{path}: unknown file type (use .json, .jsonl or .parquet)")


def load_rows(source: str, *, split: str = "train") -> list[Row]:
    """The readable rows of ``source``; use :func:`read_source` to see the bad lines too."""
    return read_source(source, split=split).rows


def select_tasks(
    tasks: Sequence[Task],
    *,
    ids: Iterable[str] | None = None,
    sort_by_image: bool = False,
    limit: int | None = None,
) -> list[Task]:
    """Keep ``ids`` (in the given order of tasks), sort by image, then keep the first ``limit``.

    Sorting by image first is how the training scripts of the seeds cut a dataset: tasks
    that share an image run next to each other, and a truncated set needs fewer images.
    Unknown ids raise :class:`DatasetError` naming them.
    """
    chosen = list(tasks)
    if ids is not None:
        wanted = list(dict.fromkeys(ids))
        known = {task.task_id for task in chosen}
        missing = [task_id for task_id in wanted if task_id not in known]
        if missing:
            raise DatasetError(f"no task with id {', '.join(missing)}")
        keep = set(wanted)
        chosen = [task for task in chosen if task.task_id in keep]
    if sort_by_image:
        chosen.sort(key=lambda task: (task.image or "", task.task_id))
    if limit is not None:
        chosen = chosen[: max(0, limit)]
    return chosen


def write_jsonl(rows: Iterable[Mapping[str, Any]], path: Path) -> int:
    """Write rows as JSONL; returns how many."""
    count = 0
    with path.open("w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False, default=str) + "\n")
            count += 1
    return count
