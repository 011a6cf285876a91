"""Observations of one fixed episode per bundled R2E row, and the recording of R2E-Gym's.

The episode (:func:`probe_actions`): a look around with every tool R2E-Gym's prompt
advertises (search in a directory, in a file, with no match; ``ls`` and a failing command;
the editor's ``view`` of a directory, a file and a range), the gold patch as ``str_replace``
edits, an edit that cannot apply, ``create``/``insert``/``undo_edit`` of a scratch file,
the edge cases of :mod:`tests.integrations.r2e_edges`, and ``finish``; then the reward.
:func:`play` runs it through :class:`SWEEnv` with either tool set.  Each row also keeps the
order in which the sandbox's file system lists 16 fresh names (``readdir_order``): listings
follow that order, R2E-Gym's as well as ours, so a replay on a file system that orders names
otherwise can only match the recording up to the order of listed entries.  The file
``tests/fixtures/r2egym_tools_observations.json`` holds what R2E-Gym's own tool scripts
answered, made by running this module::

    SANDBOX_RUNTIME_R2EGYM_SRC=/path/to/R2E-Gym/src PYTHONPATH=src:. \\
        python -m tests.integrations.r2e_recording tests/fixtures/r2egym_tools_observations.json
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from sandbox_runtime.integrations.rllm import SWEEnv
from sandbox_runtime.swe import Task, read_rows
from sandbox_runtime.swe.dataset import load_rows
from tests.integrations.gold_play import gold_edits, r2e_text
from tests.integrations.r2e_edges import edge_actions

RECORDING = Path(__file__).parent.parent / "fixtures" / "r2egym_tools_observations.json"
R2EGYM_COMMIT = "0d94c4e"


def bundled_r2e_tasks() -> list[Task]:
    """The bundled R2E-Gym rows (``swe/bundled/r2e.jsonl``), in file order."""
    return [task for task in read_rows(load_rows("bundled")).tasks if task.format == "r2e"]


def probe_actions(task: Task) -> list[tuple[str, str]]:
    """The episode's actions as ``(kind, R2E-Gym text)`` (see the module docstring)."""
    edits = gold_edits(task)
    first = edits[0].path
    scratch = f"{task.workdir}/notes.txt"
    return [
        ("search directory", r2e_text("search", search_term="def ", path=task.workdir)),
        ("search file", r2e_text("search", search_term="return", path=first)),
        ("search no match", r2e_text("search", search_term="zzz_nothing", path=task.workdir)),
        ("bash", r2e_text("execute_bash", cmd="ls")),
        ("bash failing", r2e_text("execute_bash", cmd="echo out; echo err >&2; exit 3")),
        ("view directory", r2e_text("file_editor", command="view", path=task.workdir)),
        ("view file", r2e_text("file_editor", command="view", path=first)),
        (
            "view range",
            r2e_text("file_editor", command="view", path=first, view_range="[1, 5]"),
        ),
        *(
            (
                "str_replace",
                r2e_text(
                    "file_editor", command="str_replace", path=e.path, old_str=e.old, new_str=e.new
                ),
            )
            for e in edits
        ),
        (
            "str_replace no match",
            r2e_text(
                "file_editor", command="str_replace", path=first, old_str="zzz_no", new_str="y"
            ),
        ),
        ("create", r2e_text("file_editor", command="create", path=scratch, file_text="a note\n")),
        (
            "insert",
            r2e_text(
                "file_editor", command="insert", path=scratch, insert_line="1", new_str="second"
            ),
        ),
        ("undo_edit", r2e_text("file_editor", command="undo_edit", path=scratch)),
        ("bash", r2e_text("execute_bash", cmd="rm notes.txt")),
        *edge_actions(task),
        ("finish", r2e_text("finish", command="submit")),
    ]


def play(
    task: Task, *, tools: str, backend: str = "local", options: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The episode's observations and reward with ``tools`` (``builtin`` or ``r2egym``)."""
    if options is None:
        options = {"isolation": "namespace", "base_dir": tempfile.mkdtemp()}
    env = SWEEnv(
        task,
        backend=backend,
        backend_options=options,
        base_image=os.environ.get(
            "SANDBOX_RUNTIME_TEST_IMAGE", "sandbox-runtime-test/base:bookworm"
        ),
        tools=tools,  # type: ignore[arg-type]
    )
    with env:
        env.reset()
        order = readdir_order(env)
        steps = [
            {"kind": kind, "action": action, "observation": env.step(action)[0]}
            for kind, action in probe_actions(task)
        ]
        reward = env.compute_final_reward()
        return {"task_id": task.task_id, "readdir_order": order, "steps": steps, "reward": reward}


def readdir_order(env: SWEEnv) -> list[str]:
    """The order in which the sandbox's file system lists 16 new names in the workdir."""
    assert env.sandbox is not None
    names = " ".join(f"n{i}" for i in range(16))
    listed = env.sandbox.exec(
        f'd=$(mktemp -d -p .) && cd "$d" && touch {names} && ls -f && cd .. && rm -rf "$d"'
    )
    assert listed.ok, listed.output
    return [name for name in listed.stdout.split() if name not in (".", "..")]


def main(out: str, backend: str = "docker") -> None:
    """Record R2E-Gym's tools (importable ``r2egym``) on every bundled R2E row."""
    import r2egym  # noqa: F401  (fails early where R2E-Gym's scripts are not importable)

    options: dict[str, Any] | None = {} if backend != "local" else None
    rows = [
        play(task, tools="r2egym", backend=backend, options=options) for task in bundled_r2e_tasks()
    ]
    recording = {
        "source": (
            f"R2E-Gym {R2EGYM_COMMIT}'s own tool scripts (src/r2egym/agenthub/tools: "
            "r2egym/file_editor.py, search.py, r2egym/execute_bash.py, finish.py), installed "
            "and called by SWEEnv(tools='r2egym') as rLLM's RepoEnv installs and calls them, "
            f"on the {backend} backend; the editor's chardet import served by the library's "
            "stand-in where the image lacks chardet (UTF-8 files: the same encoding)"
        ),
        "made_by": "python -m tests.integrations.r2e_recording OUT [BACKEND]",
        "rows": rows,
    }
    Path(out).write_text(
        json.dumps(recording, indent=1, ensure_ascii=False) + "\n", encoding="utf-8"
    )


if __name__ == "__main__":
    main(*sys.argv[1:])
