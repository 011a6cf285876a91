"""Test-log parsers: pytest (in R2E-Gym's and SWE-bench's keying) and unittest.

These are our own small parsers, not copies: grading must work with only the core
dependencies installed, so R2E-Gym grading and the SWE-bench fallback cannot lean on the
``swebench`` package.  Where ``swebench`` is installed, SWE-bench rows use its per-repository
parsers instead (see :mod:`sandbox_runtime.swe._swebench`).

Keys follow the benchmark that consumes them:

* :func:`parse_pytest` keys by full node id (``tests/test_a.py::TestX::test_y``), as
  SWE-bench's ``FAIL_TO_PASS`` lists do;
* :func:`parse_pytest_r2e` keys as R2E-Gym's ``expected_output_json`` does: the node id
  without its file, classes and functions joined by dots (``TestX.test_y``).

Both read pytest's ``-rA`` short summary.  :func:`parse_unittest` reads ``python -m unittest
-v`` output, and :func:`parse_any` picks whichever format a log holds, which lets the
bundled tasks fall back to the standard library's runner where pytest is not installed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = [
    "PASSED_STATUSES",
    "UnittestCase",
    "parse_any",
    "parse_pytest",
    "parse_pytest_r2e",
    "parse_unittest",
    "strip_ansi",
]

#: Statuses that count as a pass (an expected failure is a pass, as in SWE-bench).
PASSED_STATUSES = frozenset({"PASSED", "XFAIL"})

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]|\r")
_SUMMARY = "short test summary info"
_PYTEST_STATUSES = ("PASSED", "FAILED", "ERROR", "SKIPPED", "XFAIL")
_R2E_STATUSES = ("PASSED", "FAILED", "ERROR")
_UNITTEST_HEAD = re.compile(r"^(?P<method>\w+) \((?P<path>[\w.]+)\)")
_UNITTEST_STATUS = {
    "ok": "PASSED",
    "FAIL": "FAILED",
    "ERROR": "ERROR",
    "expected failure": "XFAIL",
    "unexpected success": "FAILED",
}


def strip_ansi(text: str) -> str:
    """Remove colour codes and carriage returns, as R2E-Gym does before parsing."""
    return _ANSI.sub("", text)


def _summary_lines(log: str) -> list[str]:
    lines = strip_ansi(log).splitlines()
    for index, line in enumerate(lines):
        if _SUMMARY in line:
            return lines[index + 1 :]
    return lines


def parse_pytest(log: str) -> dict[str, str]:
    """Node id -> status from pytest ``-rA`` output (SWE-bench's keying).

    A ``FAILED id - message`` line keeps only the id; ``SKIPPED [N] file:line`` summary lines
    name no test and are dropped.
    """
    results: dict[str, str] = {}
    for line in strip_ansi(log).splitlines():
        status, _, rest = line.partition(" ")
        if status not in _PYTEST_STATUSES or not rest.strip():
            continue
        test_id = rest.split(" - ", 1)[0].strip()
        if status == "SKIPPED" and test_id.startswith("["):
            continue
        results[test_id] = status
    return results


def parse_pytest_r2e(log: str) -> dict[str, str]:
    """Short name -> status, the way R2E-Gym parses its ``run_tests.sh`` output.

    Only the lines after pytest's "short test summary info" header count, only PASSED,
    FAILED and ERROR are recorded, and the key drops the file part of the node id and joins
    the rest with dots.  An ERROR line without ``::`` (a module that failed to import) gets
    the empty key, as in R2E-Gym, which makes the result differ from any expected output.
    """
    if _SUMMARY not in strip_ansi(log):
        return {}
    results: dict[str, str] = {}
    for line in _summary_lines(log):
        status, _, rest = line.partition(" ")
        if status not in _R2E_STATUSES or not rest.strip():
            continue
        node = rest.split(" - ", 1)[0].strip()
        results[".".join(node.split("::")[1:])] = status
    return results


@dataclass(frozen=True, slots=True)
class UnittestCase:
    """One test from ``unittest -v`` output."""

    module: str
    cls: str
    method: str
    status: str

    @property
    def pytest_id(self) -> str:
        """The id pytest would give it: ``pkg/mod.py::Class::method``."""
        return f"{self.module.replace('.', '/')}.py::{self.cls}::{self.method}"

    @property
    def r2e_key(self) -> str:
        """The key R2E-Gym's parser would give it: ``Class.method``."""
        return f"{self.cls}.{self.method}"


def _unittest_status(text: str) -> str | None:
    text = text.strip()
    if text.startswith("skipped"):
        return "SKIPPED"
    return _UNITTEST_STATUS.get(text)


def parse_unittest(log: str) -> list[UnittestCase]:
    """The tests of a verbose ``python -m unittest`` run, in order.

    Handles both spellings of the test line (Python 3.11+ ``test_x (mod.Class.test_x)``,
    older ``test_x (mod.Class)``) and a docstring line between the name and the status.
    """
    cases: list[UnittestCase] = []
    pending: tuple[str, str, str] | None = None
    for line in strip_ansi(log).splitlines():
        head = _UNITTEST_HEAD.match(line)
        if head:
            method, path = head.group("method"), head.group("path")
            if path.endswith("." + method):
                path = path[: -len(method) - 1]
            module, _, cls = path.rpartition(".")
            pending = (module, cls, method)
        if pending is None:
            continue
        if " ... " in line:
            tail = line.rsplit(" ... ", 1)[1]
        elif not head:
            tail = line  # the status alone, after output the test printed
        else:
            continue
        status = _unittest_status(tail)
        if status is not None:
            cases.append(UnittestCase(*pending, status))
            pending = None
    return cases


def parse_any(log: str, *, keys: str = "pytest") -> dict[str, str]:
    """Parse pytest ``-rA`` output if the log has it, else ``unittest -v`` output.

    ``keys`` is ``"pytest"`` for node ids or ``"r2e"`` for R2E-Gym's short names.
    """
    if _SUMMARY in strip_ansi(log):
        return parse_pytest_r2e(log) if keys == "r2e" else parse_pytest(log)
    cases = parse_unittest(log)
    if keys == "r2e":
        return {case.r2e_key: case.status for case in cases if case.status in _R2E_STATUSES}
    return {case.pytest_id: case.status for case in cases}
