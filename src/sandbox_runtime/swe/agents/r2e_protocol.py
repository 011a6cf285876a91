"""R2E-Gym's text protocol: actions written as ``<function=...>`` text, observations framed.

Models trained on R2E-Gym or DeepSWE trajectories (and any model served by vLLM without a
tool-call parser) answer with text such as::

    <function=execute_bash>
    <parameter=command>grep -rn parse src/</parameter>
    </function>

and expect each result back the way R2E-Gym's ``Observation`` shows it: ``Exit code: ...``
and ``Execution output of [execute_bash]:`` before a command's output (long outputs keep
their first and last 40 lines), ``Execution output of [file_editor]:`` before other tools'
output, ``<<< Finished >>>`` after ``finish``.  :func:`parse_action` reads the text (and
OpenAI-style tool calls), :func:`tool_name` maps R2E-Gym's and SWE-agent's tool names onto
:class:`~sandbox_runtime.swe.agents.tools.ToolBox` 's, and :func:`frame` writes observations.
The tool box's editor and search answer as R2E-Gym's do; the frame around them is R2E-Gym's.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Mapping
from typing import Any

from sandbox_runtime.swe.agents.tools import Observation, ToolCall

__all__ = [
    "BLOCKED_COMMANDS",
    "FINISHED",
    "NO_FUNCTION_CALL",
    "bash_command",
    "blocked_command",
    "blocked_message",
    "exit_status",
    "frame",
    "frame_script_output",
    "parse_action",
    "tool_name",
]

#: R2E-Gym's and SWE-agent's tool names -> this library's.
_TOOL_NAMES = {
    "execute_bash": "bash",
    "bash": "bash",
    "file_editor": "str_replace_editor",
    "str_replace_editor": "str_replace_editor",
    "search": "search",
    "search_dir": "search",
    "finish": "submit",
    "submit": "submit",
}

#: Commands R2E-Gym's ``execute_bash`` refuses to start (first word of the command line).
BLOCKED_COMMANDS = ("git", "ipython", "jupyter", "nohup")

#: R2E-Gym 0d94c4e's answer to a reply that calls no tool (its ``CONTINUE_MSG``, quoted as
#: the interface text a policy trained on R2E-Gym reads).
NO_FUNCTION_CALL = (
    "\nYou forgot to use a function call in your response. \n"
    "YOU MUST USE A FUNCTION CALL IN EACH RESPONSE.\n\n"
    "IMPORTANT: YOU SHOULD NEVER ASK FOR HUMAN HELP.\n"
)


def blocked_message(program: str) -> str:
    """R2E-Gym's ``execute_bash`` refusal of ``program`` (exit status 1), its exact text."""
    return f"Bash command '{program}' is not allowed. Please use a different command or tool.\n"


#: The observation after ``finish``/``submit``.
FINISHED = "<<< Finished >>>"

_FUNCTION = re.compile(r"<function\s*=\s*([^>]+)>(.*?)(?:</function>|$)", re.DOTALL)
_PARAMETER = re.compile(r"<parameter\s*=\s*([^>]+)>(.*?)</parameter>", re.DOTALL)
_ANSI = re.compile(r"\x1b\[[0-9;]*m|\r")
_HEAD_TAIL_LINES = 40


def tool_name(name: str) -> str:
    """Our name for the tool a model called ``name`` (unknown names are kept)."""
    return _TOOL_NAMES.get(name.strip().lower(), name.strip())


def _argument(key: str, value: str) -> Any:
    if key == "insert_line" and value.lstrip("-").isdigit():
        return int(value)
    if key == "view_range":
        try:
            parsed = json.loads(value)
        except ValueError:
            parsed = [int(n) for n in re.findall(r"-?\d+", value)]
        return parsed
    return value


def parse_action(
    action: str | ToolCall | Mapping[str, Any], *, raw: bool = False
) -> ToolCall | None:
    """The tool call in ``action``, or ``None`` when it calls none.

    Text is read as R2E-Gym reads it: the first ``<function=NAME>`` block, each
    ``<parameter=KEY>VALUE</parameter>`` with surrounding whitespace stripped.  For this
    library's tools R2E-Gym's ``cmd`` parameter is ``command`` and ``view_range`` a list;
    ``raw`` keeps names and texts as written (for R2E-Gym's own scripts).  A mapping is an
    OpenAI tool call (``{"name", "arguments"}`` or ``{"function": {...}}``).
    """
    if isinstance(action, ToolCall):
        return action
    if isinstance(action, Mapping):
        function = action.get("function") or {}
        name = action.get("name") or function.get("name")
        given = action.get("arguments", function.get("arguments"))
        return ToolCall.from_json(str(name), given, str(action.get("id") or "")) if name else None
    match = _FUNCTION.search(action)
    if match is None or not match.group(1).strip():
        return None
    found = _PARAMETER.findall(match.group(2))
    if raw:
        return ToolCall(match.group(1).strip(), {k.strip(): v.strip() for k, v in found})
    arguments = {key.strip(): _argument(key.strip(), value.strip()) for key, value in found}
    if "cmd" in arguments and "command" not in arguments:
        arguments["command"] = arguments.pop("cmd")
    return ToolCall(match.group(1).strip(), arguments)


def blocked_command(command: str, blocked: tuple[str, ...] = BLOCKED_COMMANDS) -> str | None:
    """The refused program ``command`` starts with, if it starts with one of ``blocked``."""
    words = command.split()
    return words[0] if words and words[0] in blocked else None


def exit_status(observation: Observation) -> str:
    """A command's status as R2E-Gym's runtime reports it.

    ``0``, ``Error: Exit code N``, or ``-1`` when it timed out (or could not run).
    """
    if observation.timed_out or observation.exit_code is None:
        return "-1"
    if observation.exit_code != 0:
        return f"Error: Exit code {observation.exit_code}"
    return "0"


def _command_output(observation: Observation, timeout: float) -> str:
    """A command's output laid out as R2E-Gym's ``execute_bash`` tool prints it."""
    if observation.timed_out:
        return f"The command took too long to execute (>{timeout:g}s)"
    ran = observation.exit_code is not None and (observation.stdout or observation.stderr)
    if not ran and observation.output:  # refused before it ran (empty, blocked): the reason
        return observation.output
    body = (
        f"[STDOUT]\n\n{observation.stdout.strip()} \n\n[STDERR]\n\n{observation.stderr.strip()}\n"
    )
    if observation.exit_code != 0:
        return f"Error executing command:\n\n{body}"
    return _ANSI.sub("", body)


def _head_and_tail(text: str) -> str:
    lines = text.splitlines()
    if len(lines) <= 2 * _HEAD_TAIL_LINES:
        return text
    divider = "-" * 50
    return "\n".join(
        [
            *lines[:_HEAD_TAIL_LINES],
            divider,
            "<Observation truncated in middle for saving context>",
            divider,
            *lines[-_HEAD_TAIL_LINES:],
        ]
    )


def bash_command(call: ToolCall) -> str:
    """The shell line that runs ``call`` as one of R2E-Gym's tool scripts.

    The tool's name, its ``command`` next, then ``--KEY VALUE`` for every other argument,
    each quoted for the shell: how R2E-Gym's ``Action`` turns a call into a command line.
    """
    parts = [shlex.quote(call.name)]
    if "command" in call.arguments:
        parts.append(shlex.quote(str(call.arguments["command"])))
    for key, value in call.arguments.items():
        if key != "command":
            parts += [f"--{key}", shlex.quote(str(value))]
    return " ".join(parts)


def frame_script_output(called: str, output: str, status: str) -> str:
    """R2E-Gym's framing of what one of its tool scripts printed (``status``: exit status)."""
    if tool_name(called) == "submit":
        return FINISHED
    if tool_name(called) == "bash":
        return f"Exit code: {status}\nExecution output of [{called}]:\n{_head_and_tail(output)}"
    return f"Execution output of [{called}]:\n{output}"


def frame(called: str, observation: Observation, *, timeout: float) -> str:
    """The observation R2E-Gym shows for a call that returned ``observation``.

    ``called`` is the tool's name as the model wrote it; ``timeout`` the command time limit.
    """
    if tool_name(called) == "bash":
        output = _command_output(observation, timeout)
    else:
        output = observation.output
        if observation.error and output.startswith("error: "):
            output = "ERROR: " + output.removeprefix("error: ")
    return frame_script_output(called, output, exit_status(observation))
