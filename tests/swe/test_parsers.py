from __future__ import annotations

import pytest

from sandbox_runtime.swe import _swebench
from sandbox_runtime.swe.formats.r2e import r2e_reward
from sandbox_runtime.swe.parsers import (
    parse_any,
    parse_pytest,
    parse_pytest_r2e,
    parse_unittest,
    strip_ansi,
)

PYTEST_LOG = """\
============================= test session starts ==============================
platform linux -- Python 3.9.20, pytest-8.3.3, pluggy-1.5.0
rootdir: /testbed
collected 6 items

r2e_tests/test_1.py ..F.sx                                               [100%]

=================================== FAILURES ===================================
_________________________ TestIdx.test_bounds_swapped __________________________

self = <r2e_tests.test_1.TestIdx object at 0x7f>

>       assert Idx("i", (4, 1)).lower == 1
E       AssertionError: assert 4 == 1

r2e_tests/test_1.py:40: AssertionError
==================================== PASSES ====================================
=========================== short test summary info ============================
PASSED r2e_tests/test_1.py::test_construction
PASSED r2e_tests/test_1.py::TestIdx::test_properties
FAILED r2e_tests/test_1.py::TestIdx::test_bounds_swapped - AssertionError: assert 4 == 1
PASSED r2e_tests/test_1.py::test_subs[x-1]
SKIPPED [1] r2e_tests/test_1.py:55: needs numpy
XFAIL r2e_tests/test_1.py::test_known_bug - reason: issue 12
============== 1 failed, 3 passed, 1 skipped, 1 xfailed in 0.57s ===============
"""


def test_pytest_parser_keys_by_node_id() -> None:
    result = parse_pytest(PYTEST_LOG)
    assert result == {
        "r2e_tests/test_1.py::test_construction": "PASSED",
        "r2e_tests/test_1.py::TestIdx::test_properties": "PASSED",
        "r2e_tests/test_1.py::TestIdx::test_bounds_swapped": "FAILED",
        "r2e_tests/test_1.py::test_subs[x-1]": "PASSED",
        "r2e_tests/test_1.py::test_known_bug": "XFAIL",
    }


def test_r2e_parser_keys_like_r2e_gym() -> None:
    assert parse_pytest_r2e(PYTEST_LOG) == {
        "test_construction": "PASSED",
        "TestIdx.test_properties": "PASSED",
        "TestIdx.test_bounds_swapped": "FAILED",
        "test_subs[x-1]": "PASSED",
    }
    assert parse_pytest_r2e("no summary here\nPASSED a.py::b") == {}


def test_r2e_collection_error_gets_the_empty_key() -> None:
    log = "=== short test summary info ===\nERROR r2e_tests/test_1.py - ImportError: no mod\n"
    assert parse_pytest_r2e(log) == {"": "ERROR"}
    reward, differing = r2e_reward({"": "ERROR"}, {"test_a": "PASSED"})
    assert reward == 0.0
    assert differing == ["test_a"]


def test_colour_codes_are_removed() -> None:
    coloured = "\x1b[32mPASSED\x1b[0m a.py::t\r\n"
    assert strip_ansi(coloured) == "PASSED a.py::t\n"
    assert parse_pytest(coloured) == {"a.py::t": "PASSED"}


UNITTEST_LOG = """\
test_plain (tests.test_core.TestSplit.test_plain) ... ok
test_trailing (tests.test_core.TestSplit.test_trailing) ... FAIL
test_old_style (tests.test_core.TestSplit) ... ERROR
test_doc (tests.test_core.TestSplit.test_doc)
Docstring first line ... ok
test_noisy (tests.test_core.TestSplit.test_noisy) ... some output
ok
test_skip (tests.test_core.TestSplit.test_skip) ... skipped 'no network'
test_xf (tests.test_core.TestSplit.test_xf) ... expected failure

======================================================================
FAIL: test_trailing (tests.test_core.TestSplit.test_trailing)
----------------------------------------------------------------------
Ran 7 tests in 0.002s

FAILED (failures=1, errors=1, skipped=1, expected failures=1)
"""


def test_unittest_parser_both_spellings_docstrings_and_output() -> None:
    cases = {c.method: c.status for c in parse_unittest(UNITTEST_LOG)}
    assert cases == {
        "test_plain": "PASSED",
        "test_trailing": "FAILED",
        "test_old_style": "ERROR",
        "test_doc": "PASSED",
        "test_noisy": "PASSED",
        "test_skip": "SKIPPED",
        "test_xf": "XFAIL",
    }
    by_id = parse_any(UNITTEST_LOG)
    assert by_id["tests/test_core.py::TestSplit::test_old_style"] == "ERROR"
    assert parse_any(UNITTEST_LOG, keys="r2e")["TestSplit.test_trailing"] == "FAILED"
    assert "TestSplit.test_skip" not in parse_any(UNITTEST_LOG, keys="r2e")


def test_r2e_reward_exact_match_only() -> None:
    expected = {"test_a": "PASSED", "test_b - msg": "FAILED"}
    assert r2e_reward({"test_a": "PASSED", "test_b": "FAILED"}, expected) == (1.0, [])
    assert r2e_reward({"test_a": "PASSED", "test_b": "PASSED"}, expected) == (0.0, ["test_b"])
    assert r2e_reward({"test_a": "PASSED"}, expected) == (0.0, ["test_b"])
    assert r2e_reward({**expected, "test_c": "PASSED"}, expected)[1] == ["test_c"]


F2P = ["t.py::test_fix"]
P2P = ["t.py::test_old", "t.py::test_skipped"]


@pytest.mark.parametrize(
    ("status", "resolved"),
    [
        (
            {
                "t.py::test_fix": "PASSED",
                "t.py::test_old": "PASSED",
                "t.py::test_skipped": "SKIPPED",
            },
            True,
        ),
        (
            {"t.py::test_fix": "XFAIL", "t.py::test_old": "PASSED", "t.py::test_skipped": "PASSED"},
            True,
        ),
        (
            {
                "t.py::test_fix": "FAILED",
                "t.py::test_old": "PASSED",
                "t.py::test_skipped": "PASSED",
            },
            False,
        ),
        (
            {"t.py::test_fix": "PASSED", "t.py::test_old": "ERROR", "t.py::test_skipped": "PASSED"},
            False,
        ),
        (
            {
                "t.py::test_fix": "SKIPPED",
                "t.py::test_old": "PASSED",
                "t.py::test_skipped": "PASSED",
            },
            False,
        ),
        ({"t.py::test_old": "PASSED", "t.py::test_skipped": "PASSED"}, False),
    ],
)
def test_swebench_rule_same_with_and_without_the_package(
    status: dict[str, str], resolved: bool
) -> None:
    assert _swebench.installed(), "the test extra installs swebench"
    with_package = _swebench.evaluate(status, F2P, P2P)
    without = _swebench._evaluate_core(status, F2P, P2P, None)
    assert with_package.graded_by == "swebench"
    assert with_package.resolved is without.resolved is resolved
    assert with_package.f2p_failed == without.f2p_failed


def test_fail_only_eval_type() -> None:
    status = {"t.py::test_old": "PASSED"}
    assert _swebench.evaluate(status, F2P, P2P, eval_type="fail_only").resolved
    assert _swebench._evaluate_core(status, F2P, P2P, "fail_only").resolved


def test_swebench_parsers_by_repo_and_by_name() -> None:
    django_log = "test_a (app.tests.T.test_a) ... ok\ntest_b (app.tests.T.test_b) ... FAIL\n"
    parse, source = _swebench.parser_for("django/django", version="4.0")
    assert "django" in source
    assert parse(django_log)["test_b (app.tests.T.test_b)"] == "FAILED"
    parse, source = _swebench.parser_for("someone/else")
    assert source == "swebench:parse_log_pytest"
    assert parse(PYTEST_LOG)["r2e_tests/test_1.py::test_construction"] == "PASSED"
    parse, source = _swebench.parser_for("x/y", name="parse_log_pytest_v2")
    assert source == "swebench:parse_log_pytest_v2"


def test_without_swebench_our_pytest_parser_is_used(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_swebench, "_module", lambda name: None)
    parse, source = _swebench.parser_for("psf/requests")
    assert source == "sandbox_runtime:parse_pytest"
    assert parse(PYTEST_LOG) == parse_pytest(PYTEST_LOG)
    assert _swebench.evaluate({"t.py::test_fix": "PASSED"}, F2P, []).graded_by == "sandbox_runtime"


# pytest 9's output for a run handed a fixture file (what the library's fallback used to do
# with a test patch's .toml): nothing collected, exit 4, the error on stderr.
NO_COLLECTORS_LOG = """\
============================= test session starts ==============================
platform linux -- Python 3.11.2, pytest-7.2.1, pluggy-1.0.0+repack
rootdir: /testbed
collected 0 items

============================ no tests ran in 0.01s =============================
ERROR: found no collectors for /testbed/tests/static/config.toml

ERROR: not found: /testbed/tests/static/config.toml
(no match in any of [<Dir static>])

ERROR: file or directory not found: tests/static/missing.py
"""


def test_a_runners_error_line_is_never_a_test() -> None:
    assert parse_pytest(NO_COLLECTORS_LOG) == {}
    assert parse_any(NO_COLLECTORS_LOG) == {}
    # The harness's own pytest parser reads "ERROR: found ..." as a test "found" with the
    # status "ERROR:"; through the library's seam only real statuses come back.  (Django's
    # parser reads "ERROR: name" as unittest's failure header, which in its logs it is.)
    for repo in ("pytest-dev/pytest", "sympy/sympy", "pydata/xarray", "someone/else"):
        parse, _ = _swebench.parser_for(repo)
        assert parse(NO_COLLECTORS_LOG) == {}, repo
    mixed = NO_COLLECTORS_LOG + "PASSED tests/test_a.py::test_ok\n"
    parse, _ = _swebench.parser_for("pytest-dev/pytest")
    assert parse(mixed) == {"tests/test_a.py::test_ok": "PASSED"}
