"""Grade a task: run its tests in the sandbox, parse the log, and apply the benchmark's rule.

Grading lives here, above the sandbox API, never in a backend: it runs commands through
:class:`~sandbox_runtime.SandboxRuntime` and reads their results.  The rules are the source
benchmarks' own:

* **R2E-Gym** (``DockerRuntime._calculate_reward_r2e``): run ``run_tests.sh`` with the
  held-out tests linked into the repository, parse pytest's short summary, drop colour codes
  and `` - message`` suffixes from the keys, and give 1 only when the result equals
  ``expected_output_json`` exactly (same keys, same statuses).
* **SWE-bench** (``swebench.harness.grading``): run the evaluation script (the row's own, or
  our fallback below), take the log between the harness's start and end markers, parse it
  with the repository's parser, and give 1 only for ``RESOLVED_FULL``: every FAIL_TO_PASS
  and PASS_TO_PASS test passes.
* **SWE-smith**: as SWE-bench, after resetting the test files to the task's base commit
  (R2E-Gym's ``reset_swesmith_tests``), with pytest on the files the test ids name.
* **Plain** JSONL tasks: the task's test command (default pytest) must report at least one
  test and no failure.

Fallback evaluation script, for SWE-bench-shaped rows that carry no ``eval_script`` (the
bundled samples, repositories outside the harness's tables): reset the test files the
``test_patch`` touches to the base commit, apply ``test_patch``, run ``pytest -rA`` on those
files and the files named in FAIL_TO_PASS/PASS_TO_PASS between the harness's markers, then
reset the test files again.  Without pytest it runs ``python -m unittest -v`` on the same
modules and maps the results to pytest ids.  A conda ``testbed`` environment is activated
when the image has one, as in the harness's images.

Every result has one of three outcomes (:class:`Outcome`), because a reward must never lie:

* ``resolved``: reward 1, the task's tests say the fix is right;
* ``unresolved``: reward 0, the task's tests ran and say it is not (``tests failed: <ids>``,
  ``patch did not apply: ...``, ``test patch did not apply``);
* ``error``: **no reward** (``None``).  The tests could not give a verdict: the sandbox is
  gone or the backend failed (``infrastructure error: ...``), the test run outlived its
  timeout (``tests timed out after Ns``), the harness itself failed or printed no results
  (``test error: ...``).  A 0 there would teach a policy that a correct fix was wrong, so
  callers count it as an error, retry it, or drop the sample; they never train on it.
"""

from __future__ import annotations

import enum
import json
import posixpath
import shlex
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from sandbox_runtime.errors import SandboxError
from sandbox_runtime.results import ExecResult
from sandbox_runtime.runtime import SandboxRuntime
from sandbox_runtime.swe import _swebench
from sandbox_runtime.swe.parsers import PASSED_STATUSES, parse_any, strip_ansi
from sandbox_runtime.swe.prepare import R2E_ALT_PATH, R2E_TESTS_IMAGE_PATH, rel
from sandbox_runtime.swe.task import Task, TaskFormat

__all__ = [
    "DEFAULT_TEST_TIMEOUT",
    "GradeResult",
    "GradingError",
    "Outcome",
    "fallback_eval_script",
    "grade",
    "r2e_reward",
]

#: Seconds the test run may take, R2E-Gym's default for ``_calculate_reward``.
DEFAULT_TEST_TIMEOUT = 300.0
_GIT = "git -c safe.directory='*'"
_TEST_ENV = {"PYTHONDONTWRITEBYTECODE": "1"}
_PATCH_EOF = "EOF_SANDBOX_RUNTIME_TEST_PATCH"
_MAX_LISTED = 10


class Outcome(str, enum.Enum):
    """What grading concluded; see the module docstring."""

    RESOLVED = "resolved"
    UNRESOLVED = "unresolved"
    ERROR = "error"


class GradingError(SandboxError):
    """A task could not be graded (an ``error`` outcome) where a number is required.

    Raised by reward functions that must return a float (an environment's final reward,
    verl's ``compute_score``) instead of returning a reward of 0 that would be a lie.
    """

    def __init__(self, grade: GradeResult) -> None:
        super().__init__(f"no reward: {grade.reason}")
        self.grade = grade


@dataclass
class GradeResult:
    """The reward for one task and everything needed to explain it.

    ``reward`` is ``None`` exactly when the outcome is ``error``: nothing was learned about
    the fix, so there is no number to report.
    """

    reward: float | None
    reason: str
    status_map: dict[str, str] = field(default_factory=dict)
    test_output: str = ""
    test_exit_code: int | None = None
    duration: float = 0.0
    graded_by: str = ""
    parser: str = ""

    @property
    def outcome(self) -> Outcome:
        """Resolved, unresolved, or error (no reward)."""
        if self.reward is None:
            return Outcome.ERROR
        return Outcome.RESOLVED if self.reward >= 1.0 else Outcome.UNRESOLVED

    @property
    def resolved(self) -> bool:
        """True for a reward of 1."""
        return self.outcome is Outcome.RESOLVED

    @property
    def is_error(self) -> bool:
        """True when the tests gave no verdict (no reward)."""
        return self.reward is None

    def reward_or_raise(self) -> float:
        """The reward, or :class:`GradingError` for an ``error`` outcome."""
        if self.reward is None:
            raise GradingError(self)
        return self.reward

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (for reports and trajectories)."""
        return {**asdict(self), "outcome": self.outcome.value}


def _listing(ids: Iterable[str]) -> str:
    items = list(ids)
    shown = ", ".join(items[:_MAX_LISTED])
    return shown + (f" (+{len(items) - _MAX_LISTED} more)" if len(items) > _MAX_LISTED else "")


def grade(
    task: Task,
    sandbox: SandboxRuntime,
    *,
    timeout: float = DEFAULT_TEST_TIMEOUT,
    patch_error: str | None = None,
) -> GradeResult:
    """Run the task's tests in ``sandbox`` (after the agent) and compute the reward.

    ``patch_error`` is what the patch tool said when the agent's patch did not apply; the
    reward is then 0 without running the tests.  Sandbox failures are returned as an
    ``error`` outcome (no reward), not raised, so one broken task never stops a run and is
    never mistaken for a wrong fix.
    """
    began = time.monotonic()
    if patch_error is not None:
        return GradeResult(0.0, f"patch did not apply: {patch_error.strip()[:500]}")
    try:
        if task.format is TaskFormat.R2E:
            result = _grade_r2e(task, sandbox, timeout)
        elif task.format in (TaskFormat.SWEBENCH, TaskFormat.SWESMITH):
            result = _grade_swebench(task, sandbox, timeout)
        else:
            result = _grade_plain(task, sandbox, timeout)
    except SandboxError as exc:
        result = GradeResult(None, f"infrastructure error: {type(exc).__name__}: {exc}")
    result.duration = time.monotonic() - began
    return result


def _run(sandbox: SandboxRuntime, script: str, timeout: float) -> ExecResult:
    return sandbox.exec(script, timeout=timeout, env=_TEST_ENV)


def _timed_out(result: ExecResult, timeout: float) -> GradeResult:
    return GradeResult(
        None,
        f"tests timed out after {timeout:g}s",
        test_output=strip_ansi(result.output),
        test_exit_code=result.exit_code,
    )


# -- R2E-Gym -------------------------------------------------------------------------------


def _r2e_normalise(results: dict[str, str]) -> dict[str, str]:
    """R2E-Gym's key normalisation: no colour codes, no `` - message`` suffix."""
    return {strip_ansi(key).split(" - ")[0]: value for key, value in sorted(results.items())}


def r2e_reward(parsed: dict[str, str], expected: dict[str, str]) -> tuple[float, list[str]]:
    """R2E-Gym's rule: 1 when the parsed results equal the expected ones, else 0.

    Returns the reward and the keys that differ (missing, extra, or another status).
    """
    got, want = _r2e_normalise(parsed), _r2e_normalise(expected)
    differing = sorted(key for key in set(got) | set(want) if key and got.get(key) != want.get(key))
    if len(got) != len(want) and not differing:
        differing = ["<unnamed test>"]
    return (1.0 if not differing else 0.0), differing


def _grade_r2e(task: Task, sandbox: SandboxRuntime, timeout: float) -> GradeResult:
    alt = rel(sandbox, R2E_ALT_PATH)
    script_path = posixpath.join(R2E_ALT_PATH, "run_tests.sh")
    if not sandbox.exists(script_path):
        return GradeResult(None, f"test error: {script_path} not found (was the image prepared?)")
    script = sandbox.read_text(script_path)
    image_tests = rel(sandbox, R2E_TESTS_IMAGE_PATH)
    # The held-out tests are reachable from the repository only while they run.
    link = sandbox.exec(
        f"rm -rf r2e_tests && if [ -d {alt}/r2e_tests ]; then ln -s {alt}/r2e_tests r2e_tests; "
        f"elif [ -d {image_tests} ]; then ln -s {image_tests} r2e_tests; fi",
        timeout=60,
    )
    if not link.ok:
        return GradeResult(None, f"test error: cannot link r2e_tests: {link.output.strip()}")
    try:
        result = _run(sandbox, script, timeout)
    finally:
        sandbox.exec("rm -f r2e_tests", timeout=60)
    if result.timed_out:
        return _timed_out(result, timeout)
    output = strip_ansi(result.output)
    parsed = parse_any(output, keys="r2e")
    base = GradeResult(
        0.0,
        "",
        status_map=parsed,
        test_output=output,
        test_exit_code=result.exit_code,
        graded_by="r2e-gym rule",
        parser="pytest -rA (R2E keys)",
    )
    if not parsed:
        base.reward = None
        base.reason = f"test error: no test results in the output (exit code {result.exit_code})"
        return base
    reward, differing = r2e_reward(parsed, task.expected_output or {})
    base.reward = reward
    base.reason = "resolved" if reward else f"tests failed: {_listing(differing)}"
    return base


# -- SWE-bench and SWE-smith ---------------------------------------------------------------


def _patch_files(patch: str) -> list[str]:
    files: list[str] = []
    for line in patch.splitlines():
        if line.startswith("diff --git "):
            name = line.split(" b/", 1)[-1].strip().strip('"')
            if name not in files:
                files.append(name)
    return files


def _id_files(test_ids: Iterable[str]) -> list[str]:
    files: list[str] = []
    for test_id in test_ids:
        path = test_id.split("::", 1)[0]
        if "::" in test_id and path.endswith(".py") and path not in files:
            files.append(path)
    return files


def fallback_eval_script(task: Task, base: str) -> str:
    """Our evaluation script for SWE-bench-shaped rows without one (see module docstring)."""
    test_patch_files = _patch_files(task.test_patch)
    files = list(dict.fromkeys(test_patch_files + _id_files(task.fail_to_pass + task.pass_to_pass)))
    reset = [
        f"{_GIT} checkout -q {shlex.quote(base)} -- {shlex.quote(path)} 2>/dev/null || true"
        for path in files
    ]
    modules = " ".join(shlex.quote(p[:-3].replace("/", ".")) for p in files if p.endswith(".py"))
    targets = " ".join(shlex.quote(path) for path in files)
    lines = [
        "set -uo pipefail",
        "if [ -f /opt/miniconda3/bin/activate ]; then",
        "  . /opt/miniconda3/bin/activate && conda activate testbed",
        "fi",
        'PY="$(command -v python || command -v python3)"',
        *reset,
    ]
    if task.test_patch.strip():
        body = task.test_patch if task.test_patch.endswith("\n") else task.test_patch + "\n"
        lines += [
            f"if ! {_GIT} apply --whitespace=nowarn - <<'{_PATCH_EOF}'",
            body + _PATCH_EOF,
            "then",
            f"  echo '{_swebench.APPLY_PATCH_FAIL} (test patch)'",
            "  exit 1",
            "fi",
        ]
    lines += [
        f"echo '{_swebench.START_TEST_OUTPUT}'",
        'if "$PY" -c "import pytest" 2>/dev/null; then',
        f'  "$PY" -m pytest -rA -p no:cacheprovider {targets}',
        "else",
        f'  "$PY" -m unittest -v {modules} 2>&1',
        "fi",
        "status=$?",
        f"echo '{_swebench.END_TEST_OUTPUT}'",
        *reset,
        'exit "$status"',
    ]
    return "\n".join(lines) + "\n"


def _slice(log: str) -> str:
    start, end = _swebench.START_TEST_OUTPUT, _swebench.END_TEST_OUTPUT
    if start in log and end in log:
        return log.split(start, 1)[1].split(end, 1)[0]
    return log


def _grade_swebench(task: Task, sandbox: SandboxRuntime, timeout: float) -> GradeResult:
    base = sandbox.base_commit()
    own_script = task.eval_script is None
    script = task.eval_script or fallback_eval_script(task, base)
    result = _run(sandbox, script, timeout)
    if result.timed_out:
        return _timed_out(result, timeout)
    output = strip_ansi(result.output)
    graded = GradeResult(0.0, "", test_output=output, test_exit_code=result.exit_code)
    if _swebench.APPLY_PATCH_FAIL in output:
        graded.reason = "test patch did not apply"
        return graded
    bad = [marker for marker in _swebench.BAD_MARKERS if marker in output]
    if bad:
        graded.reward = None
        graded.reason = f"test error: the evaluation script reported {bad[0]!r}"
        return graded
    parse, graded.parser = _swebench.parser_for(
        task.repo, name=task.log_parser, version=task.version, instance_id=task.task_id
    )
    status_map = parse(_slice(output)) or parse(output)
    if not status_map and own_script:
        # Our script ran unittest (no pytest in the sandbox): read its verbose output.
        status_map = parse_any(_slice(output))
        graded.parser = "sandbox_runtime:unittest"
    graded.status_map = status_map
    if not status_map:
        graded.reward = None
        graded.reason = f"test error: no test results in the output (exit code {result.exit_code})"
        return graded
    evaluation = _swebench.evaluate(
        status_map, task.fail_to_pass, task.pass_to_pass, eval_type=_eval_type(task)
    )
    graded.graded_by = evaluation.graded_by
    if evaluation.resolved:
        graded.reward, graded.reason = 1.0, "resolved"
    else:
        graded.reason = f"tests failed: {_listing(evaluation.f2p_failed + evaluation.p2p_failed)}"
    return graded


def _eval_type(task: Task) -> str | None:
    if task.eval_type:
        return task.eval_type
    constants = _swebench._module("swebench.harness.constants")
    fail_only = getattr(constants, "FAIL_ONLY_REPOS", ())
    return "fail_only" if task.repo in fail_only else None


# -- plain tasks ---------------------------------------------------------------------------


def _grade_plain(task: Task, sandbox: SandboxRuntime, timeout: float) -> GradeResult:
    command = task.test_command or (
        'PY="$(command -v python || command -v python3)"; "$PY" -m pytest -rA -p no:cacheprovider'
    )
    result = _run(sandbox, command, timeout)
    if result.timed_out:
        return _timed_out(result, timeout)
    output = strip_ansi(result.output)
    status_map = parse_any(output)
    graded = GradeResult(
        0.0,
        "",
        status_map=status_map,
        test_output=output,
        test_exit_code=result.exit_code,
        graded_by="all tests pass",
        parser="sandbox_runtime:pytest/unittest",
    )
    failing = [k for k, v in status_map.items() if v not in PASSED_STATUSES | {"SKIPPED"}]
    if not status_map:
        graded.reward = None
        graded.reason = f"test error: no test results in the output (exit code {result.exit_code})"
    elif failing:
        graded.reason = f"tests failed: {_listing(failing)}"
    else:
        graded.reward, graded.reason = 1.0, "resolved"
    return graded


def dumps_status_map(status_map: dict[str, str]) -> str:
    """The status map as R2E-Gym stores ``expected_output_json`` (sorted JSON text)."""
    return json.dumps(dict(sorted(status_map.items())))
