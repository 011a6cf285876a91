"""R2E-Gym's ``parsed_commit_content``: a commit as structured JSON, and the patches in it.

R2E-Gym rows carry no gold patch as text.  They carry the fixing commit as a JSON document
(R2E-Gym's ``ParsedCommit`` model: ``file_diffs`` with headers, index lines and hunks of
typed lines), and the gold patch is rebuilt from it: the diffs of the Python files that are
*not* test files.  This module reads that document with models of our own, accepting extra
fields (entities, file contents) without validating them, and rebuilds the patch text
line for line as R2E-Gym does, so that a patch that applies there applies here.

It also goes the other way (:func:`parse_unified_diff`), which is how the bundled sample
tasks get an R2E-shaped row from their patch files.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "FileDiff",
    "Hunk",
    "ParsedCommit",
    "is_r2e_test_path",
    "parse_unified_diff",
]

_LENIENT = ConfigDict(extra="ignore")
_HUNK_RE = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@(.*)$")
_HEADER_RE = re.compile(r'^diff --git "?a/(.+?)"? "?b/(.+?)"?$')
_MODE_PREFIXES = ("old mode", "new mode", "deleted file mode", "new file mode")


def is_r2e_test_path(path: str) -> bool:
    """Whether R2E-Gym counts ``path`` as a test file (and so keeps it out of the gold patch).

    The rule is R2E-Gym's ``FileDiff.is_test_file``: a ``_test.py`` suffix, a ``test_`` file
    name, or a directory component named ``tests``, ``Tests``, ``test`` or ``Test``.
    """
    parts = path.split("/")
    return (
        path.endswith("_test.py")
        or path.startswith("test_")
        or parts[-1].startswith("test_")
        or any(part in ("tests", "Tests", "test", "Test") for part in parts)
    )


class _Range(BaseModel):
    model_config = _LENIENT
    start: int
    length: int | None = None

    def render(self) -> str:
        return str(self.start) if self.length is None else f"{self.start},{self.length}"


class _Descriptor(BaseModel):
    model_config = _LENIENT
    old_range: _Range
    new_range: _Range
    section: str = ""


class _Line(BaseModel):
    model_config = _LENIENT
    content: str
    type: Literal["context", "added", "deleted", "note"]


class _LineGroup(BaseModel):
    model_config = _LENIENT
    all_lines: list[_Line] = Field(default_factory=list)


class Hunk(BaseModel):
    """One ``@@`` hunk; entity annotations of the original are ignored."""

    model_config = _LENIENT
    descriptor: _Descriptor
    line_group: _LineGroup

    def render(self) -> str:
        """The hunk as unified-diff text."""
        d = self.descriptor
        head = f"@@ -{d.old_range.render()} +{d.new_range.render()} @@"
        if d.section:
            head += f" {d.section}"
        prefix = {"context": " ", "added": "+", "deleted": "-", "note": "\\ "}
        lines = self.line_group.all_lines
        return head + "\n" + "".join(f"{prefix[line.type]}{line.content}\n" for line in lines)


class _FileInfo(BaseModel):
    model_config = _LENIENT
    path: str


class _Header(BaseModel):
    model_config = _LENIENT
    file: _FileInfo
    misc_line: str | None = None


class _IndexLine(BaseModel):
    model_config = _LENIENT
    old_commit_hash: str
    new_commit_hash: str
    mode: str = ""


class FileDiff(BaseModel):
    """The diff of one file of a parsed commit."""

    model_config = _LENIENT
    header: _Header
    index_line: _IndexLine | None = None
    is_binary_file: bool = False
    binary_line: str | None = None
    minus_file: _FileInfo | None = None
    plus_file: _FileInfo | None = None
    hunks: list[Hunk] = Field(default_factory=list)
    old_file_content: str = ""
    new_file_content: str = ""

    @property
    def path(self) -> str:
        """The file's path in the repository."""
        return self.header.file.path

    @property
    def is_test_file(self) -> bool:
        """R2E-Gym's test-file rule, see :func:`is_r2e_test_path`."""
        return is_r2e_test_path(self.path)

    def render(self) -> str:
        """The file's part of a ``git diff``, as R2E-Gym prints it."""
        text = f"diff --git a/{self.path} b/{self.path}\n"
        if self.header.misc_line:
            text += self.header.misc_line + "\n"
        if self.index_line is not None:
            idx = self.index_line
            text += f"index {idx.old_commit_hash}..{idx.new_commit_hash}"
            text += f" {idx.mode}\n" if idx.mode else "\n"
        if self.is_binary_file and self.binary_line:
            text += self.binary_line + "\n"
        if self.minus_file is not None and self.plus_file is not None:
            text += f"--- {self.minus_file.path}\n+++ {self.plus_file.path}\n"
        return text + "".join(hunk.render() for hunk in self.hunks)


class ParsedCommit(BaseModel):
    """R2E-Gym's structured commit (``parsed_commit_content``), the parts grading needs."""

    model_config = _LENIENT
    file_diffs: list[FileDiff]
    old_commit_hash: str
    new_commit_hash: str
    commit_message: str = ""
    commit_date: datetime | None = None
    metadata: dict[str, object] = Field(default_factory=dict)

    def patch(self, *, tests: bool, code: bool, only_python: bool = True) -> str:
        """The commit's diff restricted to test files, code files, or both.

        ``patch(tests=False, code=True)`` is the gold patch R2E-Gym's oracle applies.
        """
        out = []
        for diff in self.file_diffs:
            if only_python and not diff.path.endswith(".py"):
                continue
            if (diff.is_test_file and tests) or (not diff.is_test_file and code):
                out.append(diff.render())
        return "".join(out)

    @property
    def files(self) -> list[str]:
        """Every path the commit touches, in order."""
        return [diff.path for diff in self.file_diffs]


def parse_unified_diff(
    diff_text: str,
    *,
    old_commit_hash: str,
    new_commit_hash: str,
    commit_message: str = "",
    commit_date: datetime | None = None,
) -> ParsedCommit:
    """Build a :class:`ParsedCommit` from ``git diff`` text (renames are not supported).

    The result serialises (``model_dump_json``) to the JSON shape R2E-Gym stores in
    ``parsed_commit_content``; entity annotations are left empty, as R2E-Gym's own parser
    leaves them until its AST pass runs.
    """
    diffs: list[FileDiff] = []
    current: FileDiff | None = None
    hunk: Hunk | None = None
    for line in diff_text.split("\n"):
        if line.startswith("diff --git"):
            match = _HEADER_RE.match(line)
            if not match or match.group(1) != match.group(2):
                raise ValueError(f"unsupported diff header (renames are not supported): {line}")
            current = FileDiff(header=_Header(file=_FileInfo(path=match.group(1))))
            diffs.append(current)
            hunk = None
            continue
        if current is None:
            continue
        head = _HUNK_RE.match(line)
        if head:
            old_start, old_len, new_start, new_len, section = head.groups()
            hunk = Hunk(
                descriptor=_Descriptor(
                    old_range=_Range(start=int(old_start), length=_opt_int(old_len)),
                    new_range=_Range(start=int(new_start), length=_opt_int(new_len)),
                    section=section.lstrip(),
                ),
                line_group=_LineGroup(),
            )
            current.hunks.append(hunk)
        elif hunk is None:
            _header_line(current, line)
        elif line:
            kind = {" ": "context", "+": "added", "-": "deleted", "\\": "note"}.get(line[0])
            if kind is None:
                raise ValueError(f"unexpected line in hunk: {line!r}")
            content = line[2:] if kind == "note" else line[1:]
            hunk.line_group.all_lines.append(_Line(content=content, type=kind))
    return ParsedCommit(
        file_diffs=diffs,
        old_commit_hash=old_commit_hash,
        new_commit_hash=new_commit_hash,
        commit_message=commit_message,
        commit_date=commit_date,
    )


def _opt_int(text: str | None) -> int | None:
    return int(text) if text else None


def _header_line(diff: FileDiff, line: str) -> None:
    if line.startswith("index "):
        parts = line.split()
        old, _, new = parts[1].partition("..")
        diff.index_line = _IndexLine(
            old_commit_hash=old, new_commit_hash=new, mode=parts[2] if len(parts) > 2 else ""
        )
    elif line.startswith(_MODE_PREFIXES):
        misc = diff.header.misc_line
        diff.header.misc_line = f"{misc}\n{line}" if misc else line
    elif line.startswith("+++ "):
        diff.plus_file = _FileInfo(path=line[4:])
    elif line.startswith("--- "):
        diff.minus_file = _FileInfo(path=line[4:])
    elif line.startswith("Binary files"):
        diff.is_binary_file = True
        diff.binary_line = line
    elif line:
        raise ValueError(f"unexpected line in diff header: {line!r}")
