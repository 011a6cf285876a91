"""The R2E-Gym tool parity suite: edge cases of every tool, played through :class:`SWEEnv`.

Where :mod:`tests.integrations.r2e_recording` walks one ordinary episode per bundled row, this
suite asks one row's sandbox the questions where a shell, a decoder or a limit shows through
(issue 30 item 4): shell features ``/bin/sh`` (dash) and bash answer differently (brace
expansion, ``[[ ]]``, ``echo -e``, ``set -o pipefail``, here-docs, arrays), output that is
not UTF-8 or is binary, huge outputs (R2E-Gym keeps the first and last 40 lines), commands
that outlive the step timeout, blocked commands, the editor on a Latin-1 file (R2E-Gym
decodes files with chardet), its view ranges, ``create`` over a file, ``str_replace`` with
no or several matches, ``insert``, ``undo_edit``, searches with no match, many matches, in
directories and with a pattern ``grep`` refuses, and a reply that calls no tool.

``tests/fixtures/r2egym_parity.json`` holds what R2E-Gym 0d94c4e's own scripts answered
(made by ``scripts/record_r2e_parity.py R2E_GYM_CHECKOUT``, on docker); the test
``tests/integrations/test_r2egym_parity.py`` plays the same actions with this library's
built-in tools on docker and on local (namespace) and compares every answer.
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

from sandbox_runtime.integrations.rllm import SWEEnv
from sandbox_runtime.swe import Task
from tests.integrations.gold_play import r2e_text
from tests.integrations.r2e_recording import bundled_r2e_tasks

#: The step timeout every case runs under (the timeout cases sleep past it).
STEP_TIMEOUT = 4.0

_DIR = "zz_parity"
# Latin-1 bytes (é, ï, ü) no UTF-8 decoder accepts: how R2E-Gym reads them is chardet's call.
_LATIN1 = "# caf\\351 cr\\350me\\nname = 'na\\357ve r\\351sum\\351 \\374ber'\\nvalue = 1\\n"
_SETUP = " && ".join(
    [
        f"mkdir -p {_DIR}/pkg/sub {_DIR}/.hidden {_DIR}/many",
        f'printf "{_LATIN1}" > {_DIR}/latin1.py',
        f"printf 'text = \"h\\303\\251llo \\342\\234\\223\"\\nother = 2\\n' > {_DIR}/utf8.py",
        f"printf 'def f():\\n    return 1\\n\\n\\ndef g():\\n    return 1\\n' > {_DIR}/two.py",
        f"printf 'needle = 1\\n' > {_DIR}/pkg/a.py",
        f"printf 'needle = 2\\nneedle()\\n' > {_DIR}/pkg/sub/b.py",
        f"printf 'needle\\n' > {_DIR}/pkg/notes.txt",
        f"printf 'needle\\n' > {_DIR}/.hidden/h.py",
        f"printf 'needle = \\\"\\351\\\"\\n' > {_DIR}/pkg/sub/latin.py",
        f"for i in $(seq 30); do echo 'spot = 1' > {_DIR}/many/m$i.py; done",
    ]
)


def _bash(command: str) -> str:
    return r2e_text("execute_bash", cmd=command)


def _edit(**parameters: str) -> str:
    return r2e_text("file_editor", **parameters)


def _find(**parameters: str) -> str:
    return r2e_text("search", **parameters)


def _shell_cases() -> list[tuple[str, str]]:
    return [
        ("brace expansion", _bash("echo {1..3}")),
        ("double brackets", _bash("[[ 1 -eq 1 ]] && echo yes")),
        ("echo -e", _bash("echo -e 'a\\tb'")),
        ("echo -n", _bash("echo -n abc")),
        ("pipefail", _bash("set -o pipefail; false | true; echo $?")),
        ("here-doc", _bash("cat <<EOF\nline one\n$((1 + 2))\nEOF")),
        ("here-doc quoted", _bash("cat <<'EOF'\n$HOME and $((1 + 2))\nEOF")),
        ("shell name", _bash("echo $0")),
        ("bash version", _bash('echo "${BASH_VERSION:-no bash}"')),
        ("arrays", _bash("a=(1 2 3); echo ${a[1]}")),
        ("power", _bash("echo $((2**10))")),
        ("process substitution", _bash("cat <(echo hi)")),
        ("function keyword", _bash("function f { echo f; }; f")),
        ("substitution", _bash("x=abc; echo ${x/b/B}")),
        ("source", _bash("source /dev/null && echo sourced")),
        ("for loop", _bash("for i in 1 2 3; do printf '%s,' $i; done; echo")),
        ("cd and pwd", _bash(f"cd {_DIR}/pkg && pwd")),
        ("export", _bash("export X_PARITY=1; echo $X_PARITY")),
        ("missing file", _bash("ls /nonexistent_parity")),
        ("not found", _bash("no_such_program_parity")),
        ("silent success", _bash("true")),
        ("stderr only", _bash("echo warn >&2")),
        ("exit code", _bash("echo out; echo err >&2; exit 7")),
        ("colours", _bash("printf '\\033[31mred\\033[0m\\n'")),
        ("colours failing", _bash("printf '\\033[31mred\\033[0m\\n'; exit 1")),
        ("carriage return", _bash("printf 'a\\rb\\n'")),
        ("leading blank lines", _bash("printf '\\n\\n  x  \\n\\n'")),
    ]


def _encoding_cases() -> list[tuple[str, str]]:
    return [
        ("invalid utf-8 output", _bash("printf 'a\\377b\\n'")),
        ("binary output", _bash("printf '\\000\\001\\002\\200\\376\\n'")),
        ("latin-1 output", _bash(f"cat {_DIR}/latin1.py")),
        ("utf-8 output", _bash(f"cat {_DIR}/utf8.py")),
        ("invalid utf-8 stderr failing", _bash("printf 'x\\377\\n' >&2; exit 2")),
    ]


def _size_and_time_cases() -> list[tuple[str, str]]:
    return [
        ("huge output", _bash("seq 1 100000")),
        ("80 lines", _bash("seq 1 80")),
        ("81 lines", _bash("seq 1 81")),
        ("long line", _bash("python3 -c \"print('x' * 20000)\"")),
        ("huge stderr failing", _bash("seq 1 200 >&2; exit 1")),
        ("timeout", _bash("sleep 30")),
        ("timeout after output", _bash("echo before; sleep 30")),
    ]


def _blocked_cases() -> list[tuple[str, str]]:
    return [
        ("blocked git", _bash("git status")),
        ("blocked git spaced", _bash("   git log -1")),
        ("blocked nohup", _bash("nohup ls")),
        ("blocked ipython", _bash("ipython")),
        ("blocked jupyter", _bash("jupyter notebook")),
        ("not blocked echo git", _bash("echo git")),
    ]


def _editor_cases() -> list[tuple[str, str]]:
    latin1, two = f"{_DIR}/latin1.py", f"{_DIR}/two.py"
    return [
        ("view latin-1", _edit(command="view", path=latin1)),
        ("view latin-1 range", _edit(command="view", path=latin1, view_range="[2, 3]")),
        ("view utf-8", _edit(command="view", path=f"{_DIR}/utf8.py")),
        ("view range", _edit(command="view", path=two, view_range="[2, 4]")),
        ("view range to end", _edit(command="view", path=two, view_range="[5, -1]")),
        ("view range reversed", _edit(command="view", path=two, view_range="[4, 2]")),
        ("view range past end", _edit(command="view", path=two, view_range="[1, 50]")),
        ("view directory", _edit(command="view", path=f"{_DIR}/pkg")),
        ("create existing", _edit(command="create", path=two, file_text="x = 1\n")),
        ("create new", _edit(command="create", path=f"{_DIR}/new.py", file_text="a = 1\n")),
        (
            "str_replace not found",
            _edit(command="str_replace", path=two, old_str="zzz_absent", new_str="y"),
        ),
        (
            "str_replace multiple",
            _edit(command="str_replace", path=two, old_str="return 1", new_str="return 2"),
        ),
        (
            "str_replace latin-1",
            _edit(command="str_replace", path=latin1, old_str="value = 1", new_str="value = 2"),
        ),
        ("latin-1 after edit", _bash(f"od -c {latin1} | head -3")),
        ("insert", _edit(command="insert", path=two, insert_line="2", new_str="    # here")),
        ("insert past end", _edit(command="insert", path=two, insert_line="40", new_str="x")),
        ("undo insert", _edit(command="undo_edit", path=two)),
        ("undo nothing", _edit(command="undo_edit", path=f"{_DIR}/utf8.py")),
    ]


def _search_cases() -> list[tuple[str, str]]:
    return [
        ("search no match", _find(search_term="zzz_absent_parity", path=_DIR)),
        ("search many matches", _find(search_term="spot", path=f"{_DIR}/many")),
        ("search directory", _find(search_term="needle", path=f"{_DIR}/pkg")),
        ("search file", _find(search_term="needle", path=f"{_DIR}/pkg/sub/b.py")),
        ("search file no match", _find(search_term="zzz", path=f"{_DIR}/pkg/sub/b.py")),
        ("search bad pattern", _find(search_term="[", path=f"{_DIR}/pkg/sub/b.py")),
        ("search latin-1 file", _find(search_term="na", path=f"{_DIR}/latin1.py")),
        ("search missing path", _find(search_term="x", path=f"{_DIR}/absent")),
    ]


def parity_actions() -> list[tuple[str, str]]:
    """Every case as ``(kind, R2E-Gym text)``, the scratch directory's setup first."""
    return [
        ("setup", _bash(_SETUP)),
        *_shell_cases(),
        *_encoding_cases(),
        *_size_and_time_cases(),
        *_blocked_cases(),
        *_editor_cases(),
        *_search_cases(),
        ("no tool call", "I will look at the repository first."),
        ("cleanup", _bash(f"rm -rf {_DIR} && echo removed")),
    ]


def parity_task() -> Task:
    """The row whose sandbox the cases run in (the first bundled R2E row)."""
    return bundled_r2e_tasks()[0]


def play_parity(
    *,
    tools: str,
    backend: str = "local",
    options: dict[str, Any] | None = None,
    base_image: str | None = None,
) -> list[dict[str, str]]:
    """Each case's ``kind``, ``action`` and ``observation`` with ``tools`` on ``backend``."""
    if options is None:
        options = {"isolation": "namespace", "base_dir": tempfile.mkdtemp()}
    env = SWEEnv(
        parity_task(),
        backend=backend,
        backend_options=options,
        base_image=base_image
        or os.environ.get("SANDBOX_RUNTIME_TEST_IMAGE", "sandbox-runtime-test/base:bookworm"),
        tools=tools,  # type: ignore[arg-type]
        step_timeout=STEP_TIMEOUT,
    )
    with env:
        env.reset()
        return [
            {"kind": kind, "action": action, "observation": env.step(action)[0]}
            for kind, action in parity_actions()
        ]
