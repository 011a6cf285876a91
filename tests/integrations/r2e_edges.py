"""The edge cases of the recorded episode: what a plain look around and the gold edits miss.

In a scratch directory ``zz_probe`` (removed before ``finish``, so the reward is the gold
patch's): listings with hidden, non-Python and deep entries; views of a non-Python file, a
missing path, ranges to the end and out of bounds, tabs, CRLF line ends, a file long enough
for R2E-Gym's condensed view and one that does not parse; ``create`` over a file and in a
missing directory; ``str_replace`` with several matches, without ``new_str``, with tabs and
on a directory; ``insert`` at line 0, at the end, out of range and of several lines;
``undo_edit`` back through several edits, of a creation and with nothing to undo; an
unknown editor command; searches nested, relative, by pattern, of a missing path, of the
default path, with no match in a file and matching more than 100 files.
"""

from __future__ import annotations

from sandbox_runtime.swe import Task
from tests.integrations.gold_play import r2e_text

_SETUP = " && ".join(
    [
        "mkdir -p zz_probe/.hidden zz_probe/sub/deep/deeper zz_probe/b_dir zz_probe/many",
        "printf 'def hit():\\n    return \"hit\"\\n' > zz_probe/a.py",
        "printf 'hit = 1\\n' > zz_probe/.hidden/h.py",
        "printf 'hit hit\\n' > zz_probe/notes.txt",
        'printf \'x = "hit"\\n\\ty = "hit"  # hit\\n\' > zz_probe/sub/s.py',
        "printf 'hit\\n' > zz_probe/sub/deep/deeper/far.py",
        "printf 'hit\\n' > zz_probe/.dot.py",
        "printf 'hit\\r\\nhit\\r\\n' > zz_probe/b_dir/crlf.py",
        "printf 'a\\tb\\n' > zz_probe/tabs.py",
        "printf 'def broken(:\\n' > zz_probe/bad.py",
        "for i in $(seq 120); do echo '    pass' >> zz_probe/bad.py; done",
        "for i in $(seq 101); do echo 'many = 1' > zz_probe/many/m$i.py; done",
    ]
)


def long_module() -> str:
    """A module past 110 lines: long and short functions, nested and async ones, a class
    with a long docstring and one with a short one."""
    parts = ['"""A long module."""', "", "import os", ""]
    for n in range(8):
        parts += [
            f"def long_{n}(value):",
            f'    """Function {n}."""',
            "    total = 0",
            "    for item in range(value):",
            "        total += item",
            "    return total",
            "",
        ]
    parts += [
        "def short():",
        "    return 1",
        "",
        "async def waits(value):",
        "    first = value",
        "    second = first + 1",
        "    third = second + 1",
        "    return third",
        "",
        "def outer():",
        "    def inner(a):",
        "        b = a + 1",
        "        c = b + 1",
        "        d = c + 1",
        "        return d",
        "    return inner(1)",
        "",
        "class Documented:",
        '    """A class whose docstring is long.',
        "",
        "    It goes on for a while,",
        "    over several lines,",
        "    until it stops.",
        '    """',
        "",
        "    def method(self):",
        "        x = 1",
        "        y = 2",
        "        z = 3",
        "        return x + y + z",
        "",
        "class Brief:",
        '    """Short."""',
        "",
    ]
    parts += [f"CONSTANT_{n} = {n}" for n in range(20)]
    return "\n".join(parts) + "\n"


def _edit(**parameters: str) -> str:
    return r2e_text("file_editor", **parameters)


def _view_actions(probe: str) -> list[tuple[str, str]]:
    return [
        ("view directory hidden", _edit(command="view", path=probe)),
        ("view directory relative", _edit(command="view", path="zz_probe/sub")),
        ("view non-python", _edit(command="view", path=f"{probe}/notes.txt")),
        ("view missing", _edit(command="view", path=f"{probe}/nothing.py")),
        ("view range to end", _edit(command="view", path=f"{probe}/a.py", view_range="[2, -1]")),
        ("view range bad start", _edit(command="view", path=f"{probe}/a.py", view_range="[0, 1]")),
        ("view range bad end", _edit(command="view", path=f"{probe}/a.py", view_range="[1, 99]")),
        ("view tabs", _edit(command="view", path=f"{probe}/tabs.py")),
        ("view crlf", _edit(command="view", path=f"{probe}/b_dir/crlf.py")),
        ("view syntax error", _edit(command="view", path=f"{probe}/bad.py")),
        ("create long", _edit(command="create", path=f"{probe}/long.py", file_text=long_module())),
        ("view condensed", _edit(command="view", path=f"{probe}/long.py")),
        (
            "view long range",
            _edit(command="view", path=f"{probe}/long.py", view_range="[100, 112]"),
        ),
    ]


def _edit_actions(probe: str) -> list[tuple[str, str]]:
    tabs = f"{probe}/tabs.py"
    return [
        ("create existing", _edit(command="create", path=f"{probe}/a.py", file_text="x")),
        ("create missing dir", _edit(command="create", path=f"{probe}/nope/x.py", file_text="x")),
        ("str_replace multiple", _edit(command="str_replace", path=f"{probe}/a.py", old_str="hit")),
        (
            "str_replace without new_str",
            _edit(command="str_replace", path=f"{probe}/a.py", old_str='return "hit"'),
        ),
        (
            "str_replace tabs",
            _edit(command="str_replace", path=tabs, old_str="a\tb", new_str="a\tc"),
        ),
        ("str_replace directory", _edit(command="str_replace", path=probe, old_str="a")),
        ("insert at 0", _edit(command="insert", path=tabs, insert_line="0", new_str="# top")),
        ("insert at end", _edit(command="insert", path=tabs, insert_line="3", new_str="# end")),
        ("insert out of range", _edit(command="insert", path=tabs, insert_line="99", new_str="x")),
        ("insert lines", _edit(command="insert", path=tabs, insert_line="1", new_str="one\ntwo")),
        ("undo_edit again", _edit(command="undo_edit", path=tabs)),
        ("undo_edit again", _edit(command="undo_edit", path=tabs)),
        ("undo_edit again", _edit(command="undo_edit", path=tabs)),
        ("undo_edit again", _edit(command="undo_edit", path=tabs)),
        ("undo_edit nothing", _edit(command="undo_edit", path=tabs)),
        ("undo_edit create", _edit(command="undo_edit", path=f"{probe}/long.py")),
        ("unknown command", _edit(command="delete", path=f"{probe}/a.py")),
    ]


def _search_actions(probe: str) -> list[tuple[str, str]]:
    def find(**parameters: str) -> str:
        return r2e_text("search", **parameters)

    return [
        ("search nested", find(search_term="hit", path=probe)),
        ("search relative", find(search_term="hit", path="zz_probe/sub")),
        ("search file pattern", find(search_term="h.t", path=f"{probe}/sub/s.py")),
        ("search missing", find(search_term="hit", path=f"{probe}/none")),
        ("search default path", find(search_term="zzz_nothing")),
        ("search file no match", find(search_term="zzz", path=f"{probe}/sub/s.py")),
        ("search too many", find(search_term="many", path=f"{probe}/many")),
    ]


def edge_actions(task: Task) -> list[tuple[str, str]]:
    """The edge steps as ``(kind, R2E-Gym text)``, set up first and cleaned up last."""
    probe = f"{task.workdir}/zz_probe"
    return [
        ("bash setup", r2e_text("execute_bash", cmd=_SETUP)),
        *_view_actions(probe),
        *_edit_actions(probe),
        *_search_actions(probe),
        ("bash", r2e_text("execute_bash", cmd="rm -rf zz_probe")),
    ]
