"""The tool set agents act with: bash, a file editor, and submit.

One implementation serves the LLM agent (the schemas below are OpenAI function tools), the
scripted agent (a script is a list of these calls) and step-wise RL loops
(:class:`~sandbox_runtime.swe.env.SWEEnv`), so a trajectory recorded by one replays in the
others.  The tools are R2E-Gym's and SWE-agent's familiar ones, reduced to what editing a
repository needs:

* ``bash(command)``: run a shell command in the repository (per-step timeout);
* ``str_replace_editor(command, path, ...)`` with ``view`` (file with line numbers, or a
  directory listing), ``create``, ``str_replace`` (exactly one occurrence) and ``insert``;
* ``submit()``: declare the work done.

Paths are absolute sandbox paths or relative to the repository.  Everything runs through
:class:`~sandbox_runtime.SandboxRuntime`.
"""

from __future__ import annotations

import json
import shlex
import time
from dataclasses import dataclass, field
from typing import Any

from sandbox_runtime.errors import SandboxError
from sandbox_runtime.runtime import SandboxRuntime

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
                "View, create and edit files. view: show a file with line numbers (or list a "
                "directory); create: write file_text to path; str_replace: replace old_str, "
                "which must occur exactly once, by new_str; insert: insert new_str after line "
                "insert_line."
            ),
            "parameters": {
                "type": "object",
                "properties": {
                    "command": {
                        "type": "string",
                        "enum": ["view", "create", "str_replace", "insert"],
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


class ToolBox:
    """Runs :class:`ToolCall` s against one sandbox."""

    def __init__(
        self, sandbox: SandboxRuntime, *, timeout: float = 120.0, max_output_chars: int = 16000
    ) -> None:
        self.sandbox = sandbox
        self.timeout = timeout
        self.max_output_chars = max_output_chars

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
        return Observation(output, exit_code=result.exit_code, error=not result.ok)

    def _editor(self, args: dict[str, Any]) -> Observation:
        command = args["command"]
        path = str(args["path"])
        if command == "view":
            return self._view(path, args.get("view_range"))
        if command == "create":
            self.sandbox.write_text(path, str(args["file_text"]))
            return Observation(f"created {path}")
        text = self._read(path)
        if text is None:
            return Observation(f"error: no such file: {path}", error=True)
        if command == "str_replace":
            old, new = str(args["old_str"]), str(args.get("new_str", ""))
            count = text.count(old) if old else 0
            if count != 1:
                where = "does not occur" if count == 0 else f"occurs {count} times"
                return Observation(f"error: old_str {where} in {path}", error=True)
            self.sandbox.write_text(path, text.replace(old, new, 1))
            return Observation(f"edited {path}")
        if command == "insert":
            lines = text.splitlines(keepends=True)
            at = int(args["insert_line"])
            if not 0 <= at <= len(lines):
                return Observation(
                    f"error: insert_line {at} is outside 0..{len(lines)}", error=True
                )
            new = str(args["new_str"])
            lines.insert(at, new if new.endswith("\n") else new + "\n")
            self.sandbox.write_text(path, "".join(lines))
            return Observation(f"inserted {len(new.splitlines())} line(s) into {path}")
        return Observation(f"error: unknown editor command {command!r}", error=True)

    def _read(self, path: str) -> str | None:
        try:
            return self.sandbox.read_text(path, errors="replace")
        except (FileNotFoundError, IsADirectoryError):
            return None
        except SandboxError as exc:
            if isinstance(exc, (FileNotFoundError, IsADirectoryError)):
                return None
            raise

    def _view(self, path: str, view_range: Any) -> Observation:
        text = self._read(path)
        if text is None:
            listing = self.sandbox.exec(
                f"find {shlex.quote(path)} -maxdepth 2 -not -path '*/.*' | sort | head -500",
                timeout=self.timeout,
            )
            if not listing.ok or not listing.stdout.strip():
                return Observation(f"error: no such file or directory: {path}", error=True)
            return Observation(listing.stdout)
        lines = text.splitlines()
        start, end = 1, len(lines)
        if isinstance(view_range, list) and len(view_range) == 2:
            start = max(1, int(view_range[0]))
            end = len(lines) if int(view_range[1]) == -1 else min(len(lines), int(view_range[1]))
        numbered = "\n".join(f"{n:6}\t{lines[n - 1]}" for n in range(start, end + 1))
        return Observation(numbered)
