"""The shape of the library's code: no function longer than :data:`MAX_LINES`.

Ruff's mccabe check (``C90``, max-complexity 15 in pyproject.toml) bounds the branches of a
function; this bounds its length, which ruff does not measure.  A function past 80 lines
does several jobs: split it into helpers with one job each (argparse registration by
argument group, a loop's steps as methods of a small class holding its state).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MAX_LINES = 80
#: The library and the emulators.  ``swe/bundled`` is task data (sample repositories, buggy
#: on purpose), not our code.
TREES = (ROOT / "src" / "sandbox_runtime", ROOT / "emulators" / "src")
EXCLUDED = (ROOT / "src" / "sandbox_runtime" / "swe" / "bundled",)


def _sources() -> list[Path]:
    return sorted(
        path
        for tree in TREES
        for path in tree.rglob("*.py")
        if not any(path.is_relative_to(excluded) for excluded in EXCLUDED)
    )


def _too_long(path: Path) -> list[str]:
    """``file:line name (n lines)`` for each function of ``path`` over :data:`MAX_LINES`."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            lines = (node.end_lineno or node.lineno) - node.lineno + 1
            if lines > MAX_LINES:
                where = path.relative_to(ROOT)
                found.append(f"{where}:{node.lineno} {node.name} ({lines} lines)")
    return found


def test_the_trees_hold_sources() -> None:
    """Guards the test below against passing because it looked in the wrong place."""
    sources = _sources()
    assert len(sources) > 50
    assert any(path.name == "retry.py" for path in sources)
    assert any("sandbox_runtime_emulators" in path.parts for path in sources)


def test_no_function_is_longer_than_the_limit() -> None:
    too_long = [entry for path in _sources() for entry in _too_long(path)]
    assert not too_long, (
        f"functions over {MAX_LINES} lines (split them into helpers with one job each):\n"
        + "\n".join(too_long)
    )
