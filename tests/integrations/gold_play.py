"""A gold-playing agent's moves: the task's gold patch as file-editor calls, and helpers.

Each hunk of the gold patch becomes one ``str_replace`` of its old lines (context and
removed) by its new ones (context and added), on the file's absolute path in the sandbox,
which is what an agent following R2E-Gym's prompt writes.  Played in order they leave the
repository exactly as the gold patch does, so a sound grade is 1.
"""

from __future__ import annotations

import posixpath
import textwrap
from dataclasses import dataclass
from pathlib import Path

from sandbox_runtime.swe import Task


@dataclass(frozen=True)
class Edit:
    """One ``str_replace``: ``old`` occurs once in ``path`` and becomes ``new``."""

    path: str
    old: str
    new: str


def gold_edits(task: Task) -> list[Edit]:
    """The task's gold patch as ``str_replace`` edits on absolute sandbox paths."""
    edits: list[Edit] = []
    path = ""
    old: list[str] | None = None
    new: list[str] = []

    def flush() -> None:
        if old is not None:
            edits.append(Edit(path, "\n".join(old), "\n".join(new)))

    for line in task.gold_patch.splitlines():
        if line.startswith("+++ "):
            flush()
            old = None
            path = posixpath.join(task.workdir, line[4:].removeprefix("b/"))
        elif line.startswith("@@"):
            flush()
            old, new = [], []
        elif old is not None and line[:1] in (" ", "-", "+"):
            if line[0] in " -":
                old.append(line[1:])
            if line[0] in " +":
                new.append(line[1:])
    flush()
    return edits


def r2e_text(name: str, **parameters: str) -> str:
    """An action as R2E-Gym's models write it."""
    body = "".join(f"<parameter={key}>{value}</parameter>\n" for key, value in parameters.items())
    return f"<function={name}>\n{body}</function>"


def gold_r2e_actions(task: Task) -> list[str]:
    """The gold edits as R2E-Gym text actions, a look around first, ``finish`` last."""
    actions = [
        r2e_text("search", search_term="def ", path=task.workdir),
        r2e_text("execute_bash", cmd="ls"),
    ]
    for edit in gold_edits(task):
        actions.append(
            r2e_text(
                "file_editor",
                command="str_replace",
                path=edit.path,
                old_str=edit.old,
                new_str=edit.new,
            )
        )
    actions.append(r2e_text("finish", command="submit"))
    return actions


# R2E-Gym's four tool scripts, reduced to what a gold-playing agent calls (written for these
# tests, not R2E-Gym's code): installed by the library exactly as the real ones are.
_EDITOR = """#!/root/.venv/bin/python
import argparse
import sys

import chardet

parser = argparse.ArgumentParser()
parser.add_argument("command")
parser.add_argument("--path", required=True)
parser.add_argument("--old_str")
parser.add_argument("--new_str", default="")
parser.add_argument("--view_range")
args = parser.parse_args()
with open(args.path, "rb") as handle:
    data = handle.read()
text = data.decode(chardet.detect(data)["encoding"])
if args.command == "view":
    for number, line in enumerate(text.splitlines(), 1):
        print(f"{number:6}\\t{line}")
    sys.exit(0)
if text.count(args.old_str) != 1:
    print(f"ERROR: old_str occurs {text.count(args.old_str)} times in {args.path}")
    sys.exit(1)
with open(args.path, "w") as handle:
    handle.write(text.replace(args.old_str, args.new_str, 1))
print(f"The file {args.path} has been edited.")
"""
_BASH = """#!/root/.venv/bin/python
import argparse
import subprocess
import sys

parser = argparse.ArgumentParser()
parser.add_argument("--cmd", required=True)
done = subprocess.run(parser.parse_args().cmd, shell=True)
sys.exit(done.returncode)
"""
_SEARCH = """#!/root/.venv/bin/python
import argparse
import subprocess

parser = argparse.ArgumentParser()
parser.add_argument("--search_term", required=True)
parser.add_argument("--path", default=".")
args = parser.parse_args()
subprocess.run(["grep", "-rlF", "--", args.search_term, args.path])
"""
_FINISH = """#!/root/.venv/bin/python
print("<<<Finished>>>")
"""


def write_standin_r2egym(site: Path) -> None:
    """An importable ``r2egym`` with tool scripts where R2E-Gym keeps them."""
    tools = site / "r2egym" / "agenthub" / "tools"
    (tools / "r2egym").mkdir(parents=True, exist_ok=True)
    for package in (site / "r2egym", site / "r2egym" / "agenthub", tools, tools / "r2egym"):
        (package / "__init__.py").write_text("")
    scripts = {
        tools / "r2egym" / "file_editor.py": _EDITOR,
        tools / "r2egym" / "execute_bash.py": _BASH,
        tools / "search.py": _SEARCH,
        tools / "finish.py": _FINISH,
    }
    for path, text in scripts.items():
        path.write_text(textwrap.dedent(text))
        path.chmod(0o755)
