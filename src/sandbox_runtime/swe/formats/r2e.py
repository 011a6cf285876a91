"""R2E-Gym rows: read them, ready the sandbox as ``RepoEnv`` does, grade by R2E-Gym's rule.

Rows (``R2E-Gym/R2E-Gym-Lite``, ``-Subset``, ``-V1``) carry ``docker_image``, ``repo_name``,
``parsed_commit_content`` (a JSON document, see :mod:`sandbox_runtime.swe.commit`),
``expected_output_json`` (JSON text) and ``problem_statement``, plus informational fields.

Preparation: R2E-Gym images carry ``/testbed/run_tests.sh`` and the held-out tests in
``/r2e_tests``; R2E-Gym's ``setup_env`` moves both to ``/root`` so the agent does not see them,
and links the tests back into the repository only while they run.  We do the same and also
list both names in the repository's ``.git/info/exclude``, so neither shows up in a patch.

Grading (``DockerRuntime._calculate_reward_r2e``): run ``run_tests.sh`` with the held-out
tests linked in, parse pytest's short summary, drop colour codes and `` - message`` suffixes
from the keys, and give 1 only when the result equals ``expected_output_json`` exactly.

Paths in commands are relative to the workdir: on the ``local`` backend without namespaces an
absolute path in a command means a host path, while ``../root`` from ``/testbed`` means the
sandbox's ``/root`` everywhere.
"""

from __future__ import annotations

import json
import posixpath
import shlex
from collections.abc import Mapping
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from sandbox_runtime._core.runtime import SandboxRuntime
from sandbox_runtime.swe._format_kit import (
    GradeResult,
    SetupError,
    listing,
    rel,
    run_test_script,
    timed_out_result,
)
from sandbox_runtime.swe.commit import ParsedCommit
from sandbox_runtime.swe.formats.base import ParseContext, RowFormat
from sandbox_runtime.swe.parsers import parse_any, strip_ansi
from sandbox_runtime.swe.task import GradingBlock, Task, TaskFormat

__all__ = [
    "R2E_ALT_PATH",
    "R2E_TESTS_IMAGE_PATH",
    "R2EGrading",
    "R2EGymFormat",
    "r2e_reward",
    "r2e_setup_script",
]

#: Where R2E-Gym hides ``run_tests.sh`` and ``r2e_tests`` from the agent.
R2E_ALT_PATH = "/root"
#: Where R2E-Gym images carry the held-out tests.
R2E_TESTS_IMAGE_PATH = "/r2e_tests"
_GIT = "git -c safe.directory='*'"


class R2EGrading(GradingBlock):
    """The parsed test results the fixed repository produces."""

    kind: str = "r2e"
    expected_output: dict[str, str]


class _R2ERow(BaseModel):
    model_config = ConfigDict(extra="allow")
    docker_image: str
    repo_name: str
    parsed_commit_content: str | dict[str, Any]
    expected_output_json: str | dict[str, Any]
    problem_statement: str

    @field_validator("expected_output_json")
    @classmethod
    def _expected(cls, value: str | dict[str, Any]) -> str | dict[str, Any]:
        data = json.loads(value) if isinstance(value, str) else value
        if not isinstance(data, dict) or not all(isinstance(v, str) for v in data.values()):
            raise ValueError("must be a JSON object mapping test names to statuses")
        return data

    @field_validator("parsed_commit_content")
    @classmethod
    def _commit(cls, value: str | dict[str, Any]) -> str | dict[str, Any]:
        data = json.loads(value) if isinstance(value, str) else value
        try:
            ParsedCommit.model_validate(data)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(part) for part in first["loc"])
            raise ValueError(f"not an R2E-Gym ParsedCommit: {where}: {first['msg']}") from None
        return data


class R2EGymFormat(RowFormat):
    """R2E-Gym's rows, setup and reward rule."""

    name: ClassVar[str] = TaskFormat.R2E.value
    description: ClassVar[str] = "R2E-Gym rows (parsed_commit_content, expected_output_json)"
    priority: ClassVar[int] = 30
    grade_in: ClassVar[str] = "same"

    @classmethod
    def detect(cls, row: Mapping[str, Any]) -> bool:
        """Rows with R2E-Gym's commit or expected-output fields."""
        return "parsed_commit_content" in row or "expected_output_json" in row

    @classmethod
    def parse(cls, row: dict[str, Any], context: ParseContext) -> Task:
        """Image, repository and issue from the row; the fix and its tests from the commit."""
        parsed = _R2ERow.model_validate(row)
        commit = ParsedCommit.model_validate(parsed.parsed_commit_content)
        expected = parsed.expected_output_json
        assert isinstance(expected, dict)
        task_id = row.get("task_id") or row.get("instance_id")
        if not task_id:
            task_id = f"{parsed.repo_name}__{commit.new_commit_hash[:12]}"
        return Task(
            task_id=str(task_id),
            format=cls.name,
            row_format=cls.name,
            repo=parsed.repo_name,
            image=parsed.docker_image,
            workdir="/testbed",
            problem_statement=parsed.problem_statement,
            base_commit=commit.old_commit_hash or None,
            gold_patch=commit.patch(tests=False, code=True),
            grading=R2EGrading(expected_output={str(k): str(v) for k, v in expected.items()}),
            source=row,
        )

    @classmethod
    def prepare(cls, task: Task, sandbox: SandboxRuntime) -> None:
        """Move ``run_tests.sh`` and the held-out tests out of the agent's sight."""
        result = sandbox.exec(r2e_setup_script(sandbox.workdir), timeout=120)
        if not result.ok:
            raise SetupError(f"R2E-Gym setup failed: {result.output.strip()[-2000:]}")

    @classmethod
    def test_paths(cls, task: Task) -> tuple[str, ...]:
        """The held-out tests and ``run_tests.sh``, where setup hid them."""
        return (
            posixpath.join(R2E_ALT_PATH, "r2e_tests"),
            posixpath.join(R2E_ALT_PATH, "run_tests.sh"),
        )

    @classmethod
    def grade(cls, task: Task, sandbox: SandboxRuntime, timeout: float) -> GradeResult:
        """``run_tests.sh`` with the held-out tests linked in; 1 when the results match."""
        grading = task.grading_as(R2EGrading)
        alt = rel(sandbox, R2E_ALT_PATH)
        script_path = posixpath.join(R2E_ALT_PATH, "run_tests.sh")
        if not sandbox.exists(script_path):
            return GradeResult(
                None, f"test error: {script_path} not found (was the image prepared?)"
            )
        script = sandbox.read_text(script_path)
        image_tests = rel(sandbox, R2E_TESTS_IMAGE_PATH)
        # The held-out tests are reachable from the repository only while they run.
        link = sandbox.exec(
            f"rm -rf r2e_tests && if [ -d {alt}/r2e_tests ]; then ln -s {alt}/r2e_tests "
            f"r2e_tests; elif [ -d {image_tests} ]; then ln -s {image_tests} r2e_tests; fi",
            timeout=60,
        )
        if not link.ok:
            return GradeResult(None, f"test error: cannot link r2e_tests: {link.output.strip()}")
        try:
            result = run_test_script(sandbox, script, timeout)
        finally:
            sandbox.exec("rm -f r2e_tests", timeout=60)
        if result.timed_out:
            return timed_out_result(result, timeout)
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
            base.reason = (
                f"test error: no test results in the output (exit code {result.exit_code})"
            )
            return base
        reward, differing = r2e_reward(parsed, grading.expected_output)
        base.reward = reward
        base.reason = "resolved" if reward else f"tests failed: {listing(differing)}"
        return base


def r2e_setup_script(workdir: str) -> str:
    """The shell script, run in ``workdir``, that readies an R2E-Gym image as RepoEnv does.

    It is idempotent (a second run finds nothing left to move), and its paths are relative
    to the workdir so that it means the same on every backend.
    """
    alt = shlex.quote(posixpath.relpath(R2E_ALT_PATH, workdir))
    image_tests = shlex.quote(posixpath.relpath(R2E_TESTS_IMAGE_PATH, workdir))
    return f"""
set -e
mkdir -p {alt}
if [ -e run_tests.sh ]; then mv -f run_tests.sh {alt}/run_tests.sh; fi
if [ -d {image_tests} ]; then
  rm -rf {alt}/r2e_tests r2e_tests
  mv {image_tests} {alt}/r2e_tests
elif [ -d r2e_tests ] && [ ! -L r2e_tests ]; then
  rm -rf {alt}/r2e_tests
  mv r2e_tests {alt}/r2e_tests
fi
find . -name '*.pyc' -delete 2>/dev/null || true
find . -name __pycache__ -prune -exec rm -rf {{}} + 2>/dev/null || true
find {alt}/r2e_tests -name __pycache__ -prune -exec rm -rf {{}} + 2>/dev/null || true
if exclude=$({_GIT} rev-parse --git-path info/exclude 2>/dev/null); then
  mkdir -p "$(dirname "$exclude")"
  grep -qx r2e_tests "$exclude" 2>/dev/null || printf 'run_tests.sh\\nr2e_tests\\n' >> "$exclude"
fi
"""


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
