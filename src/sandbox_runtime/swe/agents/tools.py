"""The tool set agents act with: bash, a file editor, search, and submit.

One implementation serves the LLM agent (the schemas below are OpenAI function tools), the
scripted agent (a script is a list of these calls) and step-wise RL loops
(:class:`~sandbox_runtime.integrations.rllm.SWEEnv`), so a trajectory recorded by one replays
in the others.  The tools are the ones R2E-Gym's and SWE-agent's prompts advertise:

* ``bash(command)``: run a shell command in the repository (per-step timeout);
* ``str_replace_editor(command, path, ...)`` with ``view`` (a file with line numbers, a
  ``view_range``, or a directory two levels deep), ``create`` (new files only),
  ``str_replace`` (exactly one occurrence), ``insert`` (after ``insert_line``) and
  ``undo_edit`` (back to before the last edit of that file by this tool box);
* ``search(search_term, path)``: which files under a directory hold a string, and how often,
  or the matching lines of one file;
* ``submit()``: declare the work done.

Paths are absolute sandbox paths or relative to the repository.  Everything runs through
:class:`~sandbox_runtime.SandboxRuntime`.
"""

from __future__ import annotations

import json
import posixpath
import shlex
import time
from dataclasses import dataclass, field
from typing import Any

from sandbox_runtime._core.results import ExecResult
from sandbox_runtime._core.runtime import SandboxRuntime
from sandbox_runtime.errors import SandboxError
from sandbox_runtime.swe.agents.tool_check import NOT_FOUND_EXIT_CODES, require_tools

__all__ = ["TOOL_SCHEMAS", "Observation", "ToolBox", "ToolCall"]

TOOL_SCHEMAS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "bash",
            "description": "Run a bash command in the repository and return its output.",
            "parameters": {
                "type": "object",
                "properties": {"command": {"type": "string", "description": "The command."}},
                "required": ["command"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "str_replace_editor",
            "description": (
                "View, create and edit files. view: show a file with line numbers (view_range "
                "[start, end] for a part, end -1 for the rest) or list a directory; create: "
                "write file_text to a new path; str_replace: replace old_str, which must occur "
                "exactly once, by new_str; insert: insert new_str after line insert_line; "
                "undo_edit: revert the last edit of path."
            ),
            "parameters": {
                "type": "object",
                "properties": {
                    "command": {
                        "type": "string",
                        "enum": ["view", "create", "str_replace", "insert", "undo_edit"],
                    },
                    "path": {"type": "string"},
                    "file_text": {"type": "string"},
                    "old_str": {"type": "string"},
                    "new_str": {"type": "string"},
                    "insert_line": {"type": "integer"},
                    "view_range": {"type": "array", "items": {"type": "integer"}},
                },
                "required": ["command", "path"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "search",
            "description": (
                "Search for a string: under a directory, the files holding it and how often; "
                "in a file, the matching lines with their numbers."
            ),
            "parameters": {
                "type": "object",
                "properties": {
                    "search_term": {"type": "string"},
                    "path": {"type": "string", "description": "Default: the repository."},
                },
                "required": ["search_term"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "submit",
            "description": "Finish: the changes in the repository are your answer.",
            "parameters": {"type": "object", "properties": {}},
        },
    },
]


@dataclass
class ToolCall:
    """A request to run one tool."""

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    id: str = ""

    @classmethod
    def from_json(cls, name: str, arguments: str | dict[str, Any] | None, id: str = "") -> ToolCall:
        """From a model's tool call, whose arguments arrive as JSON text."""
        if isinstance(arguments, str):
            try:
                parsed = json.loads(arguments) if arguments.strip() else {}
            except json.JSONDecodeError as exc:
                return cls(name, {"__invalid__": f"arguments are not JSON: {exc.msg}"}, id)
            arguments = parsed if isinstance(parsed, dict) else {"__invalid__": "not an object"}
        return cls(name, dict(arguments or {}), id)


@dataclass
class Observation:
    """What a tool call returned."""

    output: str
    exit_code: int | None = None
    duration: float = 0.0
    done: bool = False
    error: bool = False
    timed_out: bool = False
    stdout: str = ""
    """A command's standard output alone (``bash``), for frames that show it apart."""
    stderr: str = ""


class ToolBox:
    """Runs :class:`ToolCall` s against one sandbox."""

    def __init__(
        self, sandbox: SandboxRuntime, *, timeout: float = 120.0, max_output_chars: int = 16000
    ) -> None:
        self.sandbox = sandbox
        self.timeout = timeout
        self.max_output_chars = max_output_chars
        self._history: dict[str, list[str]] = {}

    def run(self, call: ToolCall) -> Observation:
        """Run one call; errors become an observation the agent can read, never a raise.

        Sandbox-level failures (the sandbox is gone) still raise, since no agent can go on.
        """
        began = time.monotonic()
        if "__invalid__" in call.arguments:
            return Observation(f"error: {call.arguments['__invalid__']}", error=True)
        try:
            if call.name == "bash":
                observation = self._bash(str(call.arguments.get("command", "")))
            elif call.name == "str_replace_editor":
                observation = self._editor(call.arguments)
            elif call.name == "search":
                observation = self._search(
                    str(call.arguments["search_term"]), str(call.arguments.get("path") or ".")
                )
            elif call.name == "submit":
                observation = Observation("submitted", done=True)
            else:
                names = ", ".join(t["function"]["name"] for t in TOOL_SCHEMAS)
                observation = Observation(
                    f"error: unknown tool {call.name!r}; tools: {names}", error=True
                )
        except (KeyError, TypeError, ValueError) as exc:
            observation = Observation(f"error: {exc}", error=True)
        observation.duration = time.monotonic() - began
        observation.output = self._clip(observation.output)
        return observation

    def _clip(self, text: str) -> str:
        if len(text) <= self.max_output_chars:
            return text
        half = self.max_output_chars // 2
        return f"{text[:half]}\n[... {len(text) - 2 * half} characters cut ...]\n{text[-half:]}"

    def _bash(self, command: str) -> Observation:
        if not command.strip():
            return Observation("error: empty command", error=True)
        result = self.sandbox.exec(command, timeout=self.timeout)
        output = result.output
        if result.timed_out:
            output += f"\n[command timed out after {self.timeout:g}s]"
        return Observation(
            output,
            exit_code=result.exit_code,
            error=not result.ok,
            timed_out=result.timed_out,
            stdout=result.stdout,
            stderr=result.stderr,
        )

    def _editor(self, args: dict[str, Any]) -> Observation:
        command = args["command"]
        path = str(args["path"])
        if command == "view":
            return self._view(path, args.get("view_range"))
        if command == "create":
            if self.sandbox.exists(path):
                return Observation(
                    f"error: {path} already exists; create makes new files only (use "
                    "str_replace or insert to change it)",
                    error=True,
                )
            self.sandbox.write_text(path, str(args["file_text"]))
            self._history.setdefault(path, [])
            return Observation(f"File created at {path}.")
        if command == "undo_edit":
            return self._undo(path)
        text = self._read(path)
        if text is None:
            return Observation(f"error: no such file: {path}", error=True)
        if command == "str_replace":
            old, new = str(args["old_str"]), str(args.get("new_str") or "")
            count = text.count(old) if old else 0
            if count != 1:
                where = "does not occur" if count == 0 else f"occurs {count} times"
                return Observation(f"error: old_str {where} in {path}", error=True)
            first_line = text[: text.index(old)].count("\n") + 1
            edited = text.replace(old, new, 1)
            self._write(path, text, edited)
            return self._edited(path, edited, first_line, first_line + new.count("\n"))
        if command == "insert":
            lines = text.splitlines(keepends=True)
            at = int(args["insert_line"])
            if not 0 <= at <= len(lines):
                return Observation(
                    f"error: insert_line {at} is outside 0..{len(lines)}", error=True
                )
            new = str(args["new_str"])
            if lines and not lines[-1].endswith("\n") and at == len(lines):
                lines[-1] += "\n"
            lines.insert(at, new if new.endswith("\n") else new + "\n")
            edited = "".join(lines)
            self._write(path, text, edited)
            return self._edited(path, edited, at + 1, at + new.count("\n") + 1)
        return Observation(f"error: unknown editor command {command!r}", error=True)

    def _write(self, path: str, before: str, after: str) -> None:
        self.sandbox.write_text(path, after)
        self._history.setdefault(path, []).append(before)

    def _undo(self, path: str) -> Observation:
        edits = self._history.get(path)
        if not edits:
            return Observation(f"error: no edit of {path} to undo", error=True)
        previous = edits.pop()
        self.sandbox.write_text(path, previous)
        listing = _numbered(previous.splitlines(), 1)
        return Observation(f"Last edit to {path} undone. {path} is now:\n{listing}")

    @staticmethod
    def _edited(path: str, text: str, first: int, last: int) -> Observation:
        """What an edit returns: the changed lines with some context, numbered."""
        lines = text.splitlines()
        start = max(1, first - _SNIPPET_CONTEXT)
        end = min(len(lines), last + _SNIPPET_CONTEXT)
        snippet = _numbered(lines[start - 1 : end], start)
        return Observation(
            f"The file {path} has been edited. Lines {start}-{end} are now:\n{snippet}\n"
            "Check that the change is what you meant; edit again if not."
        )

    def _read(self, path: str) -> str | None:
        try:
            return self.sandbox.read_text(path, errors="replace")
        except (FileNotFoundError, IsADirectoryError):
            return None
        except SandboxError as exc:
            if isinstance(exc, (FileNotFoundError, IsADirectoryError)):
                return None
            raise

    def _kind(self, path: str) -> str | None:
        """``"dir"``, ``"file"`` or ``None`` (missing), seen through the file API."""
        try:
            info = self.sandbox.stat(path)
            if info.type == "symlink":  # followed, as the shell's ``test -d`` follows it
                self.sandbox.list_dir(path)
                return "dir"
        except (FileNotFoundError, PermissionError):
            return None
        except NotADirectoryError:
            return "file"
        return "dir" if info.type == "dir" else "file"

    def _helper(self, command: str, cwd: str, programs: tuple[str, ...]) -> ExecResult:
        """Run one of the tool box's own commands (find, grep) in ``cwd``.

        The command names its operands relative to ``cwd``, which the backend maps, so it
        reads the sandbox's files on every backend and isolation mode (on ``local`` with
        ``isolation="none"`` an absolute path in a command is the host's). A program the
        sandbox lacks raises :class:`~sandbox_runtime.ToolUnavailableError`.
        """
        result = self.sandbox.exec(command, cwd=cwd, timeout=self.timeout)
        if result.exit_code in NOT_FOUND_EXIT_CODES:
            require_tools(self.sandbox, programs)
        return result

    def _view(self, path: str, view_range: Any) -> Observation:
        text = self._read(path)
        if text is None:
            if self._kind(path) != "dir":
                return Observation(f"error: no such file or directory: {path}", error=True)
            listing = self._helper(
                "find . -maxdepth 2 -not -path '*/.*'", cwd=path, programs=("find",)
            )
            names = sorted(_under(path, line) for line in listing.stdout.splitlines() if line)
            return Observation(
                f"Files and directories up to 2 levels deep in {path}, hidden ones left out:\n"
                + "".join(f"{name}\n" for name in names[:_VIEW_MAX_ENTRIES])
            )
        lines = text.splitlines()
        start, end = 1, len(lines)
        if view_range is not None:
            if not (isinstance(view_range, list) and len(view_range) == 2):
                return Observation("error: view_range must be [start, end]", error=True)
            start, end = int(view_range[0]), int(view_range[1])
            end = len(lines) if end == -1 else end
            if not 1 <= start <= max(1, len(lines)) or not start <= end <= len(lines):
                return Observation(
                    f"error: view_range {view_range} is outside the file's lines "
                    f"1..{len(lines)} (end -1 means the last line)",
                    error=True,
                )
        body = _numbered(lines[start - 1 : end], start)
        return Observation(f"Here's the result of running `cat -n` on {path}:\n{body}")

    def _search(self, term: str, path: str) -> Observation:
        if not term:
            return Observation("error: empty search_term", error=True)
        kind = self._kind(path)
        if kind is None:
            return Observation(f"error: no such file or directory: {path}", error=True)
        quoted = shlex.quote(term)
        if kind == "file":
            folder, name = posixpath.split(path)
            result = self._helper(
                f"grep -nF -- {quoted} {shlex.quote(name)}", cwd=folder or ".", programs=("grep",)
            )
        else:
            result = self._helper(
                f"grep -rIcF --exclude-dir='.?*' -- {quoted} .", cwd=path, programs=("grep",)
            )
        if result.exit_code == 2 or result.timed_out:
            return Observation(f"error: {result.output.strip()}", error=True)
        if kind == "file":
            if not result.stdout.strip():
                return Observation(f'No matches for "{term}" in {path}.')
            # One line per match and a final newline, as R2E-Gym's search prints them.
            return Observation(f'Matches for "{term}" in {path}:\n{result.stdout.strip()}\n')
        counts = [
            (_under(path, name), sep, count)
            for name, sep, count in (line.rpartition(":") for line in result.stdout.splitlines())
            if count != "0"
        ]
        if not counts:
            return Observation(f'No matches for "{term}" in {path}.')
        if len(counts) > _SEARCH_MAX_FILES:
            return Observation(
                f'"{term}" occurs in {len(counts)} files under {path}: too many to list; '
                "search a narrower directory or a more specific term.",
            )
        total = sum(int(count) for _, _, count in counts)
        listing = "\n".join(f"{name} ({count} matches)" for name, _, count in counts)
        return Observation(
            f'{total} matches for "{term}" in {len(counts)} files under {path}:\n{listing}'
        )


_SNIPPET_CONTEXT = 4
_SEARCH_MAX_FILES = 100
_VIEW_MAX_ENTRIES = 500


def _under(folder: str, found: str) -> str:
    """A name ``find .``/``grep -r .`` printed in ``folder``, as the path the agent gave."""
    if found == ".":
        return folder
    return posixpath.join(folder, found.removeprefix("./"))


def _numbered(lines: list[str], first: int) -> str:
    return "\n".join(f"{number:6}\t{line}" for number, line in enumerate(lines, start=first))
