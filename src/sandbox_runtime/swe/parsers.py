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
-v`` output (and Django's ``runtests.py``, which prints the same lines), :func:`parse_sympy`
sympy's ``bin/test --verbose``, and :func:`parse_any` picks whichever format a log holds,
which lets the bundled tasks fall back to the standard library's runner where pytest is not
installed.

A runner's own error line is never a test: pytest's ``ERROR: found no collectors for ...`` or
``ERROR: file or directory not found: ...`` (exit 4, nothing collected) names a path, not a
test, so it yields no entry, and a run that collected nothing parses to an empty map ("no test
results", an error), never to a failed test (a 0).
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
    "parse_sympy",
    "parse_unittest",
    "strip_ansi",
    "unittest_ids",
    "unittest_import_failures",
]

#: Statuses that count as a pass (an expected failure is a pass, as in SWE-bench).
PASSED_STATUSES = frozenset({"PASSED", "XFAIL"})

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]|\r")
_SUMMARY = "short test summary info"
_PYTEST_STATUSES = ("PASSED", "FAILED", "ERROR", "SKIPPED", "XFAIL")
_R2E_STATUSES = ("PASSED", "FAILED", "ERROR")
_UNITTEST_HEAD = re.compile(r"^(?P<method>\w+) \((?P<path>[\w.]+)\)")
# sympy's ``bin/test --verbose``: ``test_name ok`` (then padding and ``[OK]`` on a file's last
# test), ``test_name F``, ``E`` (error), ``f`` (expected failure), ``X`` (unexpected pass),
# ``s`` / ``w`` (skipped), ``T`` (timed out).
_SYMPY_LINE = re.compile(r"^(?P<name>test\w*) (?P<mark>ok|F|E|f|X|s|w|T)(?: +\[\w+\])?\s*$")
# A module unittest (or Django's runner) could not import: ``name (unittest.loader._FailedTest)``
# before Python 3.11, ``pkg.name (unittest.loader._FailedTest.pkg.name)`` after.
_FAILED_IMPORT = re.compile(
    r"^(?:ERROR: )?(?P<name>[\w.]+) \(unittest\.loader\._FailedTest(?:\.[\w.]+)?\)", re.M
)
_SYMPY_STATUS = {
    "ok": "PASSED",
    "F": "FAILED",
    "E": "ERROR",
    "f": "XFAIL",
    "X": "FAILED",
    "s": "SKIPPED",
    "w": "SKIPPED",
    "T": "FAILED",
}
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
            continue  # also pytest's own "ERROR: found no collectors ...": "ERROR:" is no status
        test_id = rest.split(" - ", 1)[0].strip()
        if status == "SKIPPED" and test_id.startswith("["):
            continue
        results[test_id] = status
    return results


def parse_sympy(log: str) -> dict[str, str]:
    """Bare test name -> status from sympy's ``bin/test -C --verbose`` (the rows' own ids)."""
    results: dict[str, str] = {}
    for line in strip_ansi(log).splitlines():
        found = _SYMPY_LINE.match(line.strip())
        if found:
            results[found.group("name")] = _SYMPY_STATUS[found.group("mark")]
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
    description: str = ""
    """The docstring's first line, which Django's verbose runner prints before the status."""

    @property
    def pytest_id(self) -> str:
        """The id pytest would give it: ``pkg/mod.py::Class::method``."""
        return f"{self.module.replace('.', '/')}.py::{self.cls}::{self.method}"

    @property
    def unittest_id(self) -> str:
        """The id Django's and unittest's verbose runners print: ``method (module.Class)``."""
        return f"{self.method} ({self.module}.{self.cls})"

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
    description = ""
    for line in strip_ansi(log).splitlines():
        head = _UNITTEST_HEAD.match(line)
        if head:
            method, path = head.group("method"), head.group("path")
            if path.endswith("." + method):
                path = path[: -len(method) - 1]
            module, _, cls = path.rpartition(".")
            pending, description = (module, cls, method), ""
        if pending is None:
            continue
        if " ... " in line:
            before, _, tail = line.rpartition(" ... ")
            if not head and not description:
                description = before.strip()  # the docstring line under the test's name
        elif not head:
            tail = line  # the status alone, after output the test printed
        else:
            continue
        status = _unittest_status(tail)
        if status is not None:
            cases.append(UnittestCase(*pending, status, description))
            pending = None
    return cases


def unittest_ids(log: str) -> dict[str, str]:
    """``method (module.Class)`` -> status, and the docstring line where one was printed.

    The form of Django's rows (``test_x (app.tests.Class)``; for a test with a docstring the
    harness's rows name the docstring's first line, so both keys are given).
    """
    results: dict[str, str] = {}
    for case in parse_unittest(log):
        results[case.unittest_id] = case.status
        if case.description:
            results[case.description] = case.status
    return results


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


def unittest_import_failures(log: str) -> set[str]:
    """The (possibly dotted) names of test modules a unittest-style runner failed to import."""
    return {found.group("name") for found in _FAILED_IMPORT.finditer(strip_ansi(log))}
