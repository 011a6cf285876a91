"""The tool set agents act with: bash, a file editor, search, and submit.

One implementation serves the LLM agent (the schemas below are OpenAI function tools), the
scripted agent (a script is a list of these calls) and step-wise RL loops
(:class:`~sandbox_runtime.integrations.rllm.SWEEnv`), so a trajectory recorded by one replays
in the others.  The tools are the ones R2E-Gym's and SWE-agent's prompts advertise:

* ``bash(command)``: run a shell command in the repository (per-step timeout);
* ``str_replace_editor(command, path, ...)`` with ``view`` (a ``.py`` file with line numbers,
  condensed past 110 lines, or a ``view_range``; a directory's subdirectories and ``.py``
  files two levels deep), ``create`` (new files only), ``str_replace`` (exactly one
  occurrence), ``insert`` (after ``insert_line``) and ``undo_edit`` (back to before the last
  edit of that file by this tool box);
* ``search(search_term, path)``: which ``.py`` files under a directory hold a string, and
  how often, or the lines of one file matching a ``grep`` pattern;
* ``submit()``: declare the work done.

The editor and the search answer as R2E-Gym 0d94c4e's ``file_editor`` and ``search`` scripts
do, byte for byte (:mod:`~sandbox_runtime.swe.agents.r2e_editor`,
:mod:`~sandbox_runtime.swe.agents.r2e_search`): a policy trained on R2E-Gym sees the text it
was trained on without R2E-Gym installed, and its limits too (only ``.py`` files are viewed).
Paths are absolute sandbox paths or relative to the repository.  Everything runs through
:class:`~sandbox_runtime.SandboxRuntime`.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from sandbox_runtime._core.runtime import SandboxRuntime
from sandbox_runtime.swe.agents.r2e_editor import FileEditor
from sandbox_runtime.swe.agents.r2e_search import search
from sandbox_runtime.swe.agents.r2e_shell import decode_streams, shell_line, undecodable_output
from sandbox_runtime.swe.agents.tool_check import require_commands_see_sandbox_paths

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
                "View, create and edit files. view: show a .py file with line numbers "
                "(view_range [start, end] for a part, end -1 for the rest) or list a "
                "directory's subdirectories and .py files; create: "
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
                "Search for a string: under a directory, the .py files holding it and how "
                "often; in a file, the lines matching it (a grep pattern) with their numbers."
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
        """Tools for ``sandbox``; raises :class:`~sandbox_runtime.ToolUnavailableError` at once.

        Where the sandbox's commands do not see its paths (``local`` with ``isolation="none"``)
        it raises, with the remedy.
        """
        # The model is told its repository is at an absolute path (/testbed) and gets a
        # shell: where commands would see the host's paths there, refuse now (issue 29).
        require_commands_see_sandbox_paths(sandbox, "this library's tools (bash)")
        self.sandbox = sandbox
        self.timeout = timeout
        self.max_output_chars = max_output_chars
        self._file_editor = FileEditor(sandbox, timeout=timeout)

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
        # Under /bin/sh and read as R2E-Gym's execute_bash reads it (r2e_shell).
        result = self.sandbox.exec(shell_line(command), timeout=self.timeout)
        if result.timed_out:
            output = result.output + f"\n[command timed out after {self.timeout:g}s]"
            return Observation(
                output,
                exit_code=result.exit_code,
                error=True,
                timed_out=True,
                stdout=result.stdout,
                stderr=result.stderr,
            )
        decoded = decode_streams(result.stdout_bytes, result.stderr_bytes)
        if decoded.error is not None:
            return Observation(undecodable_output(decoded.error), exit_code=1, error=True)
        return Observation(
            decoded.stdout + decoded.stderr,
            exit_code=result.exit_code,
            error=not result.ok,
            stdout=decoded.stdout,
            stderr=decoded.stderr,
        )

    def _editor(self, args: dict[str, Any]) -> Observation:
        answer = self._file_editor.run(args)
        return Observation(answer.text, error=answer.error)

    def _search(self, term: str, path: str) -> Observation:
        answer = search(self.sandbox, term, path, timeout=self.timeout)
        return Observation(answer.text, error=answer.error)
