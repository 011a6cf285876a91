"""A test log read in the form of a SWE-bench row's own ids, and when it cannot be matched.

Rows name their tests the way the harness's parser for their repository keys them: pytest
node ids (``tests/test_a.py::TestX::test_y``), Django's ``test_y (app.tests.TestX)`` (or the
docstring line the runner printed), sympy's bare ``test_y``.  Where no specification of the
installed swebench covers a row, the library reads the log with its own parsers in all these
forms (:func:`row_status_map`) and decides with :func:`unmatched` whether the log says enough
about the row's tests to give a verdict at all.
"""

from __future__ import annotations

from collections.abc import Sequence

from sandbox_runtime.swe.parsers import (
    PASSED_STATUSES,
    parse_pytest,
    parse_sympy,
    parse_unittest,
    unittest_ids,
    unittest_import_failures,
)

__all__ = ["row_status_map", "unmatched"]

_BROKEN = frozenset({"ERROR", "FAILED"})


def row_status_map(log: str, test_ids: Sequence[str]) -> dict[str, str]:
    """Every test the log reports, keyed in each form a row may use.

    pytest's node ids (and their bare function names, for rows that name tests bare, and
    their part before the first space, for rows whose ids the harness cut there), the
    unittest / Django form with docstring lines, the unittest run's pytest-style ids (the
    bundled rows graded without pytest) and sympy's bare names.  A required test whose file
    or module failed to load as a whole (pytest's ``ERROR tests/test_a.py``, unittest's
    ``_FailedTest``) is an ``ERROR``: the log does say it did not pass.
    """
    results: dict[str, str] = {}
    pytest_ids = parse_pytest(log)
    bare = {t for t in test_ids if t.isidentifier()}
    wanted = set(test_ids)
    for node, status in pytest_ids.items():
        results[node] = status
        name = node.rsplit("::", 1)[-1]
        if "::" in node and name in bare:
            results.setdefault(name, status)
        cut = node.split(maxsplit=1)[0]
        if cut != node and cut in wanted and cut not in pytest_ids:
            # The harness splits a log line on whitespace, so published rows carry a
            # parametrized id with spaces cut at the first one (``test_fail[required-Missing``);
            # like the harness's dict, the last test so cut wins.
            results[cut] = status
    for case in parse_unittest(log):
        results.setdefault(case.pytest_id, case.status)
    results.update(unittest_ids(log))
    results.update(parse_sympy(log))
    _mark_unloadable(results, pytest_ids, unittest_import_failures(log), test_ids)
    return results


def _mark_unloadable(
    results: dict[str, str],
    pytest_ids: dict[str, str],
    failed_imports: set[str],
    test_ids: Sequence[str],
) -> None:
    for test_id in test_ids:
        if test_id in results:
            continue
        path = test_id.split("::", 1)[0]
        if "::" in test_id and pytest_ids.get(path) in _BROKEN:
            results[test_id] = "ERROR"
            continue
        module = test_id.rpartition("(")[2].rstrip(")").rpartition(".")[0]
        if module and any(module == m or module.endswith("." + m) for m in failed_imports):
            results[test_id] = "ERROR"


def unmatched(
    status_map: dict[str, str], fail_to_pass: Sequence[str], pass_to_pass: Sequence[str]
) -> list[str]:
    """The row's tests the log is silent on, when that silence leaves the verdict open.

    Empty when every required test is in the log, or when one of them is seen failing (the
    verdict is then 0 whatever the others did, as the harness would say).  Otherwise the log
    cannot be matched to the row (a runner that ran other tests, ids in another form), and
    the answer is no verdict, never 0.
    """
    missing = [t for t in (*fail_to_pass, *pass_to_pass) if t not in status_map]
    if not missing:
        return []
    failing = [t for t in fail_to_pass if status_map.get(t, "PASSED") not in PASSED_STATUSES]
    failing += [t for t in pass_to_pass if status_map.get(t, "PASSED") in _BROKEN]
    return [] if failing else missing
