"""The condensed view of a Python file that R2E-Gym's editor shows for long files.

R2E-Gym's ``file_editor view`` of a ``.py`` file longer than 110 lines (no ``view_range``)
hides the bodies of functions spanning four or more lines and the inside of long class
docstrings, leaving a ``... eliding lines A-B ...`` marker where each hidden run begins and
the other lines under their own numbers.  A policy trained on R2E-Gym's observations expects
exactly this view, so it is rebuilt here from the rules alone: which nodes are elided, how
the markers are numbered, and in which order markers and lines come.
"""

from __future__ import annotations

import ast

__all__ = ["CONCISE_AFTER_LINES", "elided_lines"]

#: A ``.py`` file with more lines than this is shown condensed when no range is asked for.
CONCISE_AFTER_LINES = 110


def _function_body(node: ast.FunctionDef | ast.AsyncFunctionDef) -> tuple[int, int] | None:
    """The 0-based line range of a function's body, when it is long enough to hide."""
    start = node.body[0].lineno - 1
    end = (node.body[-1].end_lineno or node.body[-1].lineno) - 1
    return (start, end) if end - start >= 3 else None


def _class_docstring(node: ast.ClassDef) -> tuple[int, int] | None:
    """The 0-based inside lines of a long class docstring (its first and last line kept)."""
    first = node.body[0]
    if not (
        isinstance(first, ast.Expr)
        and isinstance(first.value, ast.Constant)
        and isinstance(first.value.value, str)
    ):
        return None
    start, end = first.lineno - 1, (first.end_lineno or first.lineno) - 1
    return (start + 1, end - 1) if end - start >= 4 else None


def elided_lines(text: str, filename: str) -> list[tuple[int, str]]:
    """``(0-based line, text)`` pairs of the condensed view; markers sort before lines.

    Raises :class:`SyntaxError` when ``text`` is not Python.
    """
    tree = ast.parse(text, filename=filename)
    ranges: list[tuple[int, int]] = []
    for node in ast.walk(tree):
        found = None
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            found = _function_body(node)
        elif isinstance(node, ast.ClassDef) and node.body:
            found = _class_docstring(node)
        if found is not None:
            ranges.append(found)
    hidden = {line for start, end in ranges for line in range(start, end + 1)}
    markers = [(start, f"... eliding lines {start + 1}-{end + 1} ...") for start, end in ranges]
    kept = [(i, line) for i, line in enumerate(text.splitlines()) if i not in hidden]
    return sorted(markers + kept, key=lambda pair: pair[0])
