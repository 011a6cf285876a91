"""The file editor, answering as R2E-Gym's ``file_editor`` answers, byte for byte.

A policy trained on R2E-Gym (DeepSWE and its kind) reads the editor's answers: their
headers, the ``cat -n`` numbering (a space after the number in ``view``, a tab in edit
snippets), the four lines of context around an edit, the ``ERROR:`` lines, and what R2E-Gym
0d94c4e's editor allows (only ``.py`` files are viewed; a directory lists its directories and
``.py`` files two levels deep).  This editor gives the same text for the same call, so a
training venv needs no R2E-Gym; it is written from R2E-Gym's observable behaviour, checked
against a recording of R2E-Gym's own scripts (``tests/integrations/
test_r2egym_observations.py``).  Every answer ends in a newline, as a printed line does.

The edit history (for ``undo_edit``) lives in the editor, one list per path as the call
wrote it: ``create`` records an empty file, so undoing a creation empties the file.
"""

from __future__ import annotations

import fnmatch
import posixpath
from collections.abc import Mapping
from pathlib import PurePosixPath
from typing import Any, NamedTuple

from sandbox_runtime._core.runtime import SandboxRuntime
from sandbox_runtime.swe.agents.r2e_concise import CONCISE_AFTER_LINES, elided_lines
from sandbox_runtime.swe.agents.sandbox_paths import (
    path_kind,
    read_text,
    run_helper,
    write_text,
)

__all__ = ["EditorAnswer", "FileEditor"]

_SNIPPET_LINES = 4
_MAX_RESPONSE_CHARS = 10000
_CLIPPED = (
    "<response clipped><NOTE>To save on context only part of this file has been shown to "
    "you. You should retry this tool after you have searched inside the file with `grep -n` "
    "in order to find the line numbers of what you are looking for.</NOTE>"
)
_CONCISE_HEADER = (
    "Here is a condensed view for file: {path}; [Note: Useful for understanding file "
    "structure in a concise manner. Please use specific view_range without concise cmd if you "
    "want to explore further into the relevant parts.]\n"
)
_COMMANDS = ("view", "create", "str_replace", "insert", "undo_edit")


class EditorAnswer(NamedTuple):
    """What the editor printed, and whether it reports an error."""

    text: str
    error: bool = False


class _Refused(Exception):
    """A call the editor refuses; printed as one ``ERROR:`` line."""


def _clip(text: str) -> str:
    return text if len(text) <= _MAX_RESPONSE_CHARS else text[:_MAX_RESPONSE_CHARS] + _CLIPPED


def _cat_n(content: str, descriptor: str, first: int = 1) -> str:
    """An edit's listing: clipped, tabs expanded, ``%6d<TAB>line`` for every line."""
    lines = _clip(content).expandtabs().split("\n")
    numbered = "\n".join(f"{first + i:6}\t{line}" for i, line in enumerate(lines))
    return f"Here's the result of running `cat -n` on {descriptor}:\n{numbered}\n"


def _flag(value: Any) -> bool:
    return value is True or str(value).strip().lower() == "true"


class FileEditor:
    """``view``, ``create``, ``str_replace``, ``insert`` and ``undo_edit`` on one sandbox."""

    def __init__(self, sandbox: SandboxRuntime, *, timeout: float = 120.0) -> None:
        self.sandbox = sandbox
        self.timeout = timeout
        self._history: dict[str, list[str]] = {}

    def run(self, args: Mapping[str, Any]) -> EditorAnswer:
        """One call (R2E-Gym's parameters); refusals are answers, never raises."""
        if args.get("path") is None:
            return EditorAnswer(
                "ERROR: Unhandled exception: expected str, bytes or os.PathLike object, "
                "not NoneType\n",
                error=True,
            )
        path = str(PurePosixPath(str(args["path"])))
        command = str(args.get("command"))
        try:
            self._validate(command, path)
            if command not in _COMMANDS:
                raise _Refused(
                    f"Unrecognized command '{command}'. "
                    "Allowed commands: view, create, str_replace, insert, undo_edit."
                )
            return self._dispatch(command, path, args)
        except _Refused as refused:
            return EditorAnswer(f"ERROR: {refused}\n", error=True)

    def _dispatch(self, command: str, path: str, args: Mapping[str, Any]) -> EditorAnswer:
        if command == "view":
            return self._view(path, args.get("view_range"), concise=_flag(args.get("concise")))
        if command == "create":
            return self._create(path, args.get("file_text"))
        if command == "str_replace":
            return self._str_replace(path, args.get("old_str"), args.get("new_str"))
        if command == "insert":
            return self._insert(path, args.get("insert_line"), args.get("new_str"))
        return self._undo(path)

    def _validate(self, command: str, path: str) -> None:
        kind = path_kind(self.sandbox, path)
        if command == "create":
            if kind is not None:
                raise _Refused(f"File already exists at: {path}. Cannot overwrite with 'create'.")
        elif kind is None:
            raise _Refused(f"The path '{path}' does not exist.")
        if kind == "dir" and command != "view":
            raise _Refused(
                f"The path '{path}' is a directory. Only 'view' can be used on directories."
            )

    def _read(self, path: str) -> str:
        text = read_text(self.sandbox, path)
        if text is None:
            raise _Refused(f"Failed to read file {path}: [Errno 2] No such file or directory")
        return text

    def _write(self, path: str, before: str, after: str) -> None:
        self._history.setdefault(path, []).append(before)
        write_text(self.sandbox, path, after)

    # -- view ------------------------------------------------------------------------

    def _view(self, path: str, view_range: Any, *, concise: bool) -> EditorAnswer:
        if path_kind(self.sandbox, path) == "dir":
            return self._view_dir(path)
        name = PurePosixPath(path)
        if name.suffix != ".py":
            return _failed(
                "ERROR: Viewing non-Python files is disallowed for saving context. "
                f"File '{name.name}' is not a .py file."
            )
        text = self._read(path)
        if not view_range and not concise:
            concise = len(text.splitlines()) > CONCISE_AFTER_LINES
        if concise:
            try:
                lines = elided_lines(text, path)
            except SyntaxError as exc:
                raise _Refused(f"Syntax error for file {path}: {exc}") from exc
            header = _CONCISE_HEADER.format(path=path)
        else:
            lines = list(enumerate(text.splitlines()))
            header = f"Here's the result of running `cat -n` on the file: {path}:\n"
        if view_range and len(view_range) == 2:
            start, end = int(view_range[0]), int(view_range[1])
            problem = _range_problem(view_range, start, end, len(lines))
            if problem:
                return _failed(problem)
            lines = [(i, t) for i, t in lines if start <= i + 1 and (end == -1 or i + 1 <= end)]
        body = "\n".join(f"{i + 1:6d} {line}" for i, line in lines)
        return EditorAnswer(_clip(header + body) + "\n")

    def _view_dir(self, path: str) -> EditorAnswer:
        """Directories and ``.py`` files two levels deep, hidden ones left out.

        In ``find``'s order, named ``path/...`` as ``find PATH`` names them.
        """
        found = run_helper(
            self.sandbox,
            r"find . -maxdepth 2 \( -type d -o -name '*.py' \)",
            cwd=path,
            programs=("find",),
            timeout=self.timeout,
        )
        if found.stderr.strip():
            return _failed(found.stderr.strip())
        names = [_as_found_from(path, line) for line in found.stdout.splitlines() if line]
        listing = "".join(f"{name}\n" for name in names if not fnmatch.fnmatchcase(name, "*/.*"))
        header = (
            f"Here's the files and directories up to 2 levels deep in {path}, excluding hidden:\n"
        )
        return EditorAnswer(_clip(header + listing) + "\n")

    # -- edits -----------------------------------------------------------------------

    def _create(self, path: str, file_text: Any) -> EditorAnswer:
        if file_text is None:
            raise _Refused("Cannot create file without 'file_text' parameter.")
        parent = posixpath.dirname(path) or "."
        if path_kind(self.sandbox, parent) != "dir":
            raise _Refused(
                f"Error creating file at {path}: [Errno 2] No such file or directory: {path!r}"
            )
        text = str(file_text)
        self.sandbox.write_text(path, text)
        self._history.setdefault(path, []).append("")
        return EditorAnswer(
            f"File created at {path}. {_cat_n(text, path)}"
            "Review the file and make sure that it is as expected. Edit the file if necessary.\n"
        )

    def _str_replace(self, path: str, old: Any, new: Any) -> EditorAnswer:
        if old is None:
            raise _Refused("Missing required parameter 'old_str' for 'str_replace'.")
        old, new = str(old), str(new or "")
        text = self._read(path)
        occurrences = text.count(old)
        if occurrences == 0:
            raise _Refused(f"No occurrences of '{old}' found in {path} for replacement.")
        if occurrences > 1:
            raise _Refused(
                f"Multiple occurrences of '{old}' found in {path}. "
                "Please ensure it is unique before using str_replace."
            )
        edited = text.replace(old, new)
        self._write(path, text, edited)
        line = text.split(old)[0].count("\n")
        start = max(0, line - _SNIPPET_LINES)
        end = line + _SNIPPET_LINES + new.count("\n")
        snippet = "\n".join(edited.split("\n")[start : end + 1])
        return EditorAnswer(
            f"The file {path} has been edited. {_cat_n(snippet, f'a snippet of {path}', start + 1)}"
            "Review the changes and make sure they are as expected. Edit the file again if "
            "necessary.\n"
        )

    def _insert(self, path: str, at: Any, new: Any) -> EditorAnswer:
        if new is None:
            raise _Refused("Missing required parameter 'new_str' for 'insert'.")
        text = self._read(path)
        if at is None:
            raise _Refused(
                "Unhandled exception: '<' not supported between instances of 'NoneType' and 'int'"
            )
        line, lines, added = int(at), text.split("\n"), str(new).split("\n")
        if line < 0 or line > len(lines):
            raise _Refused(f"Invalid insert_line {line}. Must be in [0, {len(lines)}].")
        self._write(path, text, "\n".join(lines[:line] + added + lines[line:]))
        first = max(0, line - _SNIPPET_LINES)
        snippet = "\n".join(lines[first:line] + added + lines[line : line + _SNIPPET_LINES])
        listing = _cat_n(snippet, "a snippet of the edited file", first + 1)
        return EditorAnswer(
            f"The file {path} has been edited. {listing}"
            "Review the changes and make sure they are as expected (correct indentation, no "
            "duplicate lines, etc). Edit the file again if necessary.\n"
        )

    def _undo(self, path: str) -> EditorAnswer:
        edits = self._history.get(path)
        if not edits:
            raise _Refused(f"No previous edits found for {path} to undo.")
        previous = edits.pop()
        write_text(self.sandbox, path, previous)
        return EditorAnswer(f"Last edit to {path} undone successfully. {_cat_n(previous, path)}\n")


def _failed(message: str) -> EditorAnswer:
    """An answer R2E-Gym prints as an empty line and then ``ERROR: message``."""
    return EditorAnswer(f"\nERROR: {message}\n", error=True)


def _range_problem(view_range: Any, start: int, end: int, total: int) -> str | None:
    shown = [start, end] if isinstance(view_range, (list, tuple)) else view_range
    if not 1 <= start <= total:
        return f"Invalid view_range {shown}: start line must be in [1, {total}]"
    if end != -1 and (end < start or end > total):
        return (
            f"Invalid view_range {shown}: end must be >= start and <= {total}, "
            "or -1 to view until end."
        )
    return None


def _as_found_from(path: str, found: str) -> str:
    """A name ``find .`` printed in ``path``, as ``find PATH`` would have printed it."""
    if found == ".":
        return path
    rest = found.removeprefix("./")
    return f"/{rest}" if path == "/" else f"{path}/{rest}"
