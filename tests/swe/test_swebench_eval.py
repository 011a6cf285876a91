"""The evaluation of SWE-bench rows without ``eval_script``: the harness's recipe and the fallback.

The rows are real published SWE-bench Verified instances with the eval script the official
harness ran for them and the log it produced (``data/swebench_harness_rows.json``, taken from
UKGovernmentBEIS/inspect_ai's stored harness logs; its ``source`` field says where).  Which
recipe applies depends on the installed swebench: 3.x and 4.x carry the harness's tables, 5.x
does not; each test asserts what the installed release must give.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from sandbox_runtime.swe import _swebench
from sandbox_runtime.swe._harness_spec import harness_spec
from sandbox_runtime.swe.formats._swebench_eval import (
    fallback_eval_script,
    harness_eval_script,
    runnable,
)
from sandbox_runtime.swe.formats._swebench_ids import row_status_map, unmatched
from sandbox_runtime.swe.parsers import parse_sympy, unittest_ids

DATA = Path(__file__).parent / "data" / "swebench_harness_rows.json"


@cache
def _rows() -> dict[str, dict[str, Any]]:
    return {row["instance_id"]: row for row in json.loads(DATA.read_text())["rows"]}


def _row(instance_id: str) -> dict[str, Any]:
    return _rows()[instance_id]


def _has_specs() -> bool:
    constants = _swebench._module("swebench.harness.constants")
    return isinstance(getattr(constants, "MAP_REPO_VERSION_TO_SPECS", None), dict)


ROW_IDS = sorted(_rows())


@pytest.mark.parametrize("instance_id", ROW_IDS)
def test_the_harness_recipe_is_the_published_eval_script(instance_id: str) -> None:
    row = _row(instance_id)
    spec = harness_spec(row["repo"], row["version"], row["test_patch"])
    if not _has_specs():  # swebench 5 (or none): no recipe, the fallback grades the row
        assert spec is None
        return
    assert spec is not None
    published = row["harness"]
    script = harness_eval_script(spec, row["test_patch"], row["base_commit"])
    # The harness's exact test command line: runner, then directives (no .txt for 10097).
    assert f"{published['test_cmd']} 2>&1" in script.splitlines()
    assert list(spec.eval_commands) == published["eval_commands"]
    assert spec.install == published["install"]
    reset_files = published["reset"].split()[3:]
    for path in reset_files:
        assert f"checkout -q {row['base_commit']} -- {path}" in script
    # Reset, patch, markers, tests, reset again, in the harness's order.
    lines = script.splitlines()
    start = lines.index(f"echo '{_swebench.START_TEST_OUTPUT}'")
    end = lines.index(f"echo '{_swebench.END_TEST_OUTPUT}'")
    assert start < lines.index(f"{published['test_cmd']} 2>&1") < end
    assert script.index(published["install"]) < script.index("apply --whitespace=nowarn")
    assert "if [ -f /opt/miniconda3/bin/activate ]" in script  # conda only where it exists


def test_a_repository_swebench_does_not_know_has_no_recipe() -> None:
    row = _row("sympy__sympy-20590")
    assert harness_spec("someone/unknown", "1.0", row["test_patch"]) is None
    assert harness_spec("sympy/sympy", "0.0-no-such-version", row["test_patch"]) is None
    assert harness_spec("sympy/sympy", None, row["test_patch"]) is None


def _fallback(instance_id: str, repo: str | None = None) -> str:
    row = _row(instance_id)
    ids = [*row["FAIL_TO_PASS"], *row["PASS_TO_PASS"]]
    return fallback_eval_script(repo or row["repo"], row["test_patch"], ids, [], "BASE")


def test_fallback_runs_sympy_bin_test_on_the_patch_files() -> None:
    script = _fallback("sympy__sympy-20590")
    assert '"$PY" bin/test -C --verbose sympy/core/tests/test_basic.py 2>&1' in script
    assert "if [ -f bin/test ]; then" in script  # else pytest / unittest


def test_fallback_runs_django_runtests_on_modules() -> None:
    script = _fallback("django__django-11099")
    runner = '"$PY" tests/runtests.py --verbosity 2 --settings=test_sqlite --parallel 1'
    assert f"{runner} auth_tests.test_validators 2>&1" in script


def test_fallback_never_hands_a_non_test_file_to_a_runner() -> None:
    row = _row("django__django-10097")
    assert runnable(["tests/validators/valid_urls.txt", "a/b.toml", "t/test_x.py"]) == [
        "t/test_x.py"
    ]
    generic = _fallback("django__django-10097", repo="someone/else")
    django = _fallback("django__django-10097")
    for script in (generic, django):
        run_lines = [ln for ln in script.splitlines() if "pytest -rA" in ln or "runtests" in ln]
        assert run_lines
        assert not any(".txt" in ln for ln in run_lines)
    # The .txt files are still reset and patched, as the harness does.
    assert "-- tests/validators/valid_urls.txt" in django
    assert "diff --git a/tests/validators/valid_urls.txt" in row["test_patch"]


def test_a_rows_own_test_cmd_runs_its_test_files() -> None:
    patch = (
        "diff --git a/tests/test_a.py b/tests/test_a.py\n"
        "--- a/tests/test_a.py\n+++ b/tests/test_a.py\n"
    )
    script = fallback_eval_script(
        "x/y", patch + "diff --git a/cfg.toml b/cfg.toml\n", [], [], "B", test_cmd="tox -e py --"
    )
    assert "tox -e py -- tests/test_a.py 2>&1" in script.splitlines()


def test_sympy_log_is_read_as_the_rows_bare_names() -> None:
    row = _row("sympy__sympy-20590")
    ids = [*row["FAIL_TO_PASS"], *row["PASS_TO_PASS"]]
    ours = parse_sympy(row["test_log"])
    assert all(ours[t] == "PASSED" for t in ids)
    # The file's last test has "[OK]" after its status; it is a test too.
    assert ours["test_replace_exceptions"] == "PASSED"
    assert unmatched(row_status_map(row["test_log"], ids), row["FAIL_TO_PASS"], ids) == []
    parse, _ = _swebench.parser_for("sympy/sympy")
    harness = parse(row["test_log"])
    assert {t: harness[t] for t in ids} == {t: ours[t] for t in ids}


def test_django_log_is_read_as_the_rows_ids() -> None:
    row = _row("django__django-11099")
    ids = [*row["FAIL_TO_PASS"], *row["PASS_TO_PASS"]]
    ours = unittest_ids(row["test_log"])
    # The last test's "ok" comes after the runner's own output, on its own line.
    assert all(ours.get(t) == "PASSED" for t in ids), [t for t in ids if t not in ours]
    parse, _ = _swebench.parser_for("django/django")
    harness = parse(row["test_log"])
    assert {t: harness.get(t) for t in ids} == {t: ours[t] for t in ids}


def test_django_docstring_ids_and_import_failures() -> None:
    log = (
        "test_plain (app.tests.T) ... ok\n"
        "test_doc (app.tests.T)\n"
        "Named URLs should be reversible ... FAIL\n"
        "test_other (other.tests_mod) ... ERROR\n"
        "ERROR: tests_new (unittest.loader._FailedTest)\n"
    )
    ids = [
        "Named URLs should be reversible",
        "test_new (app.tests_new.K)",
        "test_plain (app.tests.T)",
    ]
    status = row_status_map(log, ids)
    assert status["Named URLs should be reversible"] == "FAILED"
    assert status["test_doc (app.tests.T)"] == "FAILED"
    assert status["test_new (app.tests_new.K)"] == "ERROR"  # its module did not import


def test_a_log_that_names_none_of_the_rows_tests_gives_no_verdict() -> None:
    log = "tests/test_a.py::test_other PASSED\n"  # a runner that ran something else
    f2p, p2p = ["tests/test_a.py::test_new"], ["tests/test_a.py::test_old"]
    status = row_status_map(
        "=== short test summary info ===\nPASSED tests/test_a.py::test_other\n", [*f2p, *p2p]
    )
    assert unmatched(status, f2p, p2p) == [*f2p, *p2p]
    # One required test seen failing decides it: 0, whatever the others did.
    failing = {"tests/test_a.py::test_new": "FAILED"}
    assert unmatched(failing, f2p, p2p) == []
    # A test file that failed to load fails its tests (the null patch's usual log).
    broken = row_status_map("ERROR tests/test_a.py - ImportError: cannot import name 'x'\n", f2p)
    assert broken["tests/test_a.py::test_new"] == "ERROR"
    assert log  # the plain -v line alone is not a summary: nothing parsed from it
    assert row_status_map(log, f2p) == {}


def test_ids_the_harness_cut_at_a_space_match_the_full_ids_in_the_log() -> None:
    """marshmallow-code__marshmallow-1359 publishes ``test_fail[required-Missing``: the
    harness splits each log line on whitespace, and the row keeps what it read."""
    log = (
        "=== short test summary info ===\n"
        "PASSED tests/test_fields.py::T::test_fail[required-Missing data for required field.]\n"
        "FAILED tests/test_fields.py::T::test_fail[null-Field may not be null.] - assert 1\n"
        "PASSED tests/test_fields.py::T::test_fail[custom-Custom message]\n"
    )
    ids = [
        "tests/test_fields.py::T::test_fail[required-Missing",
        "tests/test_fields.py::T::test_fail[null-Field",
    ]
    status = row_status_map(log, ids)
    assert status[ids[0]] == "PASSED"
    assert status[ids[1]] == "FAILED"
    assert "tests/test_fields.py::T::test_fail[custom-Custom" not in status  # not the row's
