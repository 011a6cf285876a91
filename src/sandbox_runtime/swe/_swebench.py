"""The seam to the ``swebench`` package: its log parsers and its grading, when installed.

SWE-bench rows are graded with the harness's own code where it is installed (``pip install
'sandbox-runtime-swe[swebench]'``): the per-repository log parser and ``get_eval_tests_report`` /
``get_resolution_status``.  The package moved things between releases (``MAP_REPO_TO_PARSER``
until 4.x; a name registry plus per-language maps in 5.x), so the lookups here try each
place.  Without the package, :func:`evaluate` applies the same rule with our own small code
(every FAIL_TO_PASS and PASS_TO_PASS test passes; a skipped PASS_TO_PASS test is not a
regression), and :mod:`sandbox_runtime.swe.parsers` supplies the pytest parser.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

from sandbox_runtime.swe.parsers import PASSED_STATUSES, parse_pytest

__all__ = [
    "APPLY_PATCH_FAIL",
    "END_TEST_OUTPUT",
    "START_TEST_OUTPUT",
    "TESTS_TIMEOUT",
    "Evaluation",
    "evaluate",
    "installed",
    "parser_for",
]

# The harness's log markers (the same strings in every swebench release).
START_TEST_OUTPUT = ">>>>> Start Test Output"
END_TEST_OUTPUT = ">>>>> End Test Output"
APPLY_PATCH_FAIL = ">>>>> Patch Apply Failed"
RESET_FAILED = ">>>>> Reset Failed"
TESTS_ERROR = ">>>>> Tests Errored"
TESTS_TIMEOUT = ">>>>> Tests Timed Out"
BAD_MARKERS = (APPLY_PATCH_FAIL, RESET_FAILED, TESTS_ERROR, TESTS_TIMEOUT)
# The statuses of the harness's ``TestStatus`` (the same in every release).
_STATUSES = frozenset({"PASSED", "FAILED", "SKIPPED", "ERROR", "XFAIL"})

LogParser = Callable[[str], dict[str, str]]


def _module(name: str) -> Any | None:
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def installed() -> bool:
    """Whether the ``swebench`` package can be imported here."""
    return _module("swebench.harness.grading") is not None


def _repo_parsers() -> dict[str, Any]:
    parsers = _module("swebench.harness.log_parsers")
    if parsers is None:
        return {}
    table = getattr(parsers, "MAP_REPO_TO_PARSER", None)
    if isinstance(table, dict):
        return table
    merged: dict[str, Any] = {}
    for language in ("python", "javascript", "c", "go", "java", "php", "ruby", "rust"):
        module = _module(f"swebench.harness.log_parsers.{language}")
        for name in dir(module) if module else ():
            if name.startswith("MAP_REPO_TO_PARSER"):
                merged.update(getattr(module, name))
    return merged


def _named_parser(name: str) -> Any:
    """A parser function by name from the harness's language modules (swebench 3)."""
    if not name.startswith("parse_log_"):
        return None
    for language in ("python", "javascript"):
        found = getattr(_module(f"swebench.harness.log_parsers.{language}"), name, None)
        if callable(found):
            return found
    return None


def parser_for(
    repo: str, *, name: str | None = None, version: str | None = None, instance_id: str = ""
) -> tuple[LogParser, str]:
    """The log parser for a SWE-bench row, and where it came from (for reports).

    Order: the parser the row names (``log_parser``, newer datasets), the harness's parser
    for the repository, then pytest (``swebench``'s if installed, else ours).
    """
    spec = SimpleNamespace(repo=repo, version=version or "", instance_id=instance_id)
    registry = getattr(_module("swebench.harness.log_parsers"), "PARSER_REGISTRY", None)
    function: Any = None
    source = ""
    if name and isinstance(registry, dict) and name in registry:
        function, source = registry[name], f"swebench:{name}"
    elif name and (named := _named_parser(name)) is not None:  # before PARSER_REGISTRY
        function, source = named, f"swebench:{name}"
    elif (found := _repo_parsers().get(repo)) is not None:
        function, source = found, f"swebench:{getattr(found, '__name__', 'parser')}"
    else:
        python = _module("swebench.harness.log_parsers.python")
        function = getattr(python, "parse_log_pytest", None)
        source = "swebench:parse_log_pytest"
    if function is None:
        return parse_pytest, "sandbox_runtime:parse_pytest"

    def parse(log: str) -> dict[str, str]:
        # The harness's pytest parser takes any line starting with a status word for a test:
        # pytest's "ERROR: found no collectors for x.toml" becomes a test "found" with status
        # "ERROR:".  A runner's error line is never a test, so only real statuses are kept.
        return {k: v for k, v in function(log, spec).items() if v in _STATUSES}

    return parse, source


@dataclass(frozen=True, slots=True)
class Evaluation:
    """Whether the run resolved the task, and which required tests did not pass."""

    resolved: bool
    f2p_failed: tuple[str, ...]
    p2p_failed: tuple[str, ...]
    graded_by: str


def evaluate(
    status_map: dict[str, str],
    fail_to_pass: Sequence[str],
    pass_to_pass: Sequence[str],
    *,
    eval_type: str | None = None,
) -> Evaluation:
    """Apply SWE-bench's resolution rule (FULL: every F2P and P2P test passes)."""
    grading = _module("swebench.harness.grading")
    if grading is not None:
        return _evaluate_with_swebench(grading, status_map, fail_to_pass, pass_to_pass, eval_type)
    return _evaluate_core(status_map, fail_to_pass, pass_to_pass, eval_type)


def _evaluate_with_swebench(
    grading: Any,
    status_map: dict[str, str],
    fail_to_pass: Sequence[str],
    pass_to_pass: Sequence[str],
    eval_type: str | None,
) -> Evaluation:
    constants = _module("swebench.harness.constants")
    gold = {
        "FAIL_TO_PASS": list(fail_to_pass),
        "PASS_TO_PASS": list(pass_to_pass),
        "FAIL_TO_FAIL": [],
        "PASS_TO_FAIL": [],
    }
    kwargs: dict[str, Any] = {}
    enum = getattr(constants, "EvalType", None)
    if enum is not None:
        kwargs["eval_type"] = enum(eval_type) if eval_type else enum.PASS_AND_FAIL
    report = grading.get_eval_tests_report(status_map, gold, **kwargs)
    status = grading.get_resolution_status(report)
    full = getattr(getattr(constants, "ResolvedStatus", None), "FULL", None)
    resolved = status == (full.value if full is not None else "RESOLVED_FULL")
    f2p_failed = tuple(report["FAIL_TO_PASS"]["failure"])
    if eval_type != "fail_only":
        # swebench before 4 puts a skipped FAIL_TO_PASS test in neither list, so a patch that
        # makes the new tests skip "resolves" the task: a reward an RL policy learns to game.
        # A skipped F2P test is a failure here, as in later swebench releases.
        skipped = tuple(
            t for t in fail_to_pass if status_map.get(t) == "SKIPPED" and t not in f2p_failed
        )
        if skipped:
            resolved, f2p_failed = False, f2p_failed + skipped
    return Evaluation(
        resolved=resolved,
        f2p_failed=f2p_failed,
        p2p_failed=tuple(report["PASS_TO_PASS"]["failure"]),
        graded_by="swebench",
    )


def _evaluate_core(
    status_map: dict[str, str],
    fail_to_pass: Sequence[str],
    pass_to_pass: Sequence[str],
    eval_type: str | None,
) -> Evaluation:
    """SWE-bench's rule without the package (used only when it is not installed)."""
    if eval_type == "fail_only":
        f2p = tuple(t for t in fail_to_pass if status_map.get(t) == "FAILED")
        p2p = tuple(t for t in pass_to_pass if status_map.get(t) == "FAILED")
    else:
        f2p = tuple(t for t in fail_to_pass if status_map.get(t) not in PASSED_STATUSES)
        p2p = tuple(
            t
            for t in pass_to_pass
            if status_map.get(t) not in PASSED_STATUSES and status_map.get(t) != "SKIPPED"
        )
    return Evaluation(
        resolved=not f2p and not p2p, f2p_failed=f2p, p2p_failed=p2p, graded_by="sandbox_runtime"
    )
