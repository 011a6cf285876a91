"""Reward for a model-written patch, as a verl custom reward function.

For single-turn SWE training (the model reads the issue and answers with a diff, as in
SWE-RL), verl calls a ``compute_score(data_source, solution_str, ground_truth, extra_info)``
function for every response.  :func:`compute_score` is one: it takes the diff out of the
response, opens a fresh sandbox for the task in ``extra_info`` (the row that
``sandbox-runtime tasks rllm --prompt patch`` stores there), applies the diff, runs the task's
own tests and returns 1.0 or 0.0.  In verl's config (keys as verl 0.9.1 reads them; checked
against its ``get_custom_reward_fn`` and ``migrate_legacy_reward_impl``)::

    custom_reward_function:            # verl moves it to reward.custom_reward_function
      path: <site-packages>/sandbox_runtime/swe/patch_reward.py
      name: compute_score
      reward_kwargs: {backend: docker, retries: 1}

``custom_reward_function.reward_kwargs`` is what reaches ``compute_score``;
``reward_model.reward_kwargs`` does not (verl 0.9.1 moves it to ``reward.reward_kwargs``, the
reward *manager's* arguments; verl 0.5 passed those to the manager, whose ``__init__`` then
raises ``TypeError``).

A reward never lies: when the tests give no verdict (sandbox gone, backend error, harness
timeout), the grading is tried again ``retries`` times in a fresh sandbox and then
:class:`~sandbox_runtime.swe.grading.GradingError` is raised, never a 0.0.  What verl does
with it depends on its reward manager: ``naive`` (the default, both the reward-loop and the
legacy one) lets it propagate and the step fails; ``limited`` turns every exception and its
own ``reward.timeout`` into 0.0, and the legacy ``naive`` turns a ``TimeoutError`` from
``compute_score_timeout`` into 0.0, so use ``naive`` and keep any verl timeout above the
grading time (``test_timeout`` x (1 + ``retries``)).  :class:`GradingError` is not a
``TimeoutError``, so verl never mistakes it for its own timeout.

verl loads this file by its path, as a module it does not register: it defines no class
(a dataclass here would fail there), only functions over the package's own modules.

Every reward gets its own sandbox, so responses are graded independently and in parallel
(verl's reward workers may call this from many threads or processes).  That sandbox is
fresh and holds nothing but the response's patch, so grading is always the SWE-bench
harness's ``fresh`` kind here (there is no agent sandbox to grade in).  Grading is strict by
default (:mod:`sandbox_runtime.swe.strict`): a response whose patch text is not exactly
git's unified diff is refused (0, flagged; :mod:`sandbox_runtime.swe.patch_text`), the
patch's changes to the task's tests, ``conftest.py``, test settings, startup hooks, modules
shadowing the standard library and the like are dropped before the rest is applied with
``git apply`` (no fuzz), and a canary catches source that neuters the assertions, so a patch
that games the tests earns nothing; ``reward_kwargs: {grading:
benchmark}`` applies the whole patch.  What a patch changes that grading reads is flagged
either way.

With ``reward_kwargs: {details: true}``, :func:`compute_score` returns verl's dict form,
``{"score": ..., ...}``, whose other keys verl logs as ``reward_extra_info``: the reward
integrity counts (``flagged``: a tamper flag, a refused patch or a tripped canary;
``dropped``: files strict grading kept from the tests; ``refused``: the text was not git's
unified diff; ``canary_tripped``: :mod:`sandbox_runtime.swe.canary`), and the sandbox's
accounting (start latency, sandbox-seconds, commands, bytes, retries, faults, grading time;
:mod:`sandbox_runtime._core.usage`).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Mapping
from typing import Any

from sandbox_runtime._core.runtime import SandboxRuntime
from sandbox_runtime.errors import SandboxError
from sandbox_runtime.swe.benchmark_checks import grade_benchmark, patch_paths
from sandbox_runtime.swe.grading import DEFAULT_TEST_TIMEOUT, GradeResult, GradingError, grade
from sandbox_runtime.swe.prepare import prepare
from sandbox_runtime.swe.rows import parse_row
from sandbox_runtime.swe.runner import RunOptions, task_sandbox_config
from sandbox_runtime.swe.strict import (
    DroppedChange,
    GradingMode,
    apply_strict,
    check_canary,
    grade_recorded,
    refused_grade,
    resolve_grading,
)
from sandbox_runtime.swe.tamper import flags_from_patch
from sandbox_runtime.swe.task import Task
from sandbox_runtime.swe.verdict import PatchVerdict

__all__ = ["PatchVerdict", "compute_score", "extract_patch", "grade_patch", "judge_patch"]

_FENCED = re.compile(r"^[ \t]*```[^\n`]*\n(.*?)^[ \t]*```", re.DOTALL | re.MULTILINE)
#: A fenced block the response itself calls a diff, whatever is in it.
_DIFF_BLOCK = re.compile(
    r"^[ \t]*```[ \t]*(?:diff|patch|udiff)[ \t]*\n(.*?)^[ \t]*```", re.DOTALL | re.MULTILINE
)
_DIFF_START = re.compile(r"^(?:diff --git |--- (?:a/|/dev/null))", re.MULTILINE)


def extract_patch(response: str) -> str | None:
    """The unified diff in a model's response, or ``None`` if it holds none.

    The last fenced block that looks like a diff wins (models often show the broken code
    first); otherwise the text from the first ``diff --git`` or ``--- a/`` line on; otherwise
    the last block fenced as ``diff`` or ``patch``, whatever its format.
    """
    blocks: list[str] = _FENCED.findall(response)
    for text in [*reversed(blocks), response]:
        start = _DIFF_START.search(text)
        if start:
            return text[start.start() :].rstrip("`\n") + "\n"
    # A block the response calls a diff but in another format (context, ed, normal): handed
    # on as it is, so strict grading refuses (and flags) it instead of grading no patch.
    labelled = [text for text in _DIFF_BLOCK.findall(response) if text.strip()]
    return labelled[-1] if labelled else None


def judge_patch(
    row: Mapping[str, Any],
    patch: str | None,
    *,
    backend: str = "local",
    backend_options: Mapping[str, Any] | None = None,
    base_image: str | None = None,
    test_timeout: float = DEFAULT_TEST_TIMEOUT,
    grading: str = GradingMode.STRICT.value,
) -> PatchVerdict:
    """Apply ``patch`` to a fresh sandbox of the task ``row``, grade it, and account for it.

    ``grading="strict"`` (the default) applies only the patch's change to non-test source
    (:mod:`sandbox_runtime.swe.strict`); ``"benchmark"`` applies all of it.
    """
    strict = resolve_grading(grading, "fresh") is GradingMode.STRICT
    if not patch:
        return PatchVerdict(GradeResult(0.0, "no patch in the response", grade_in="fresh"))
    task = parse_row(dict(row), index="extra_info")
    options = RunOptions(
        backend=backend,
        test_timeout=test_timeout,
        base_image=base_image,
        backend_options=dict(backend_options or {}),
    )
    sandbox = SandboxRuntime(task_sandbox_config(task, options))
    with sandbox:
        prepare(task, sandbox)
        sandbox.base_commit(refresh=True)
        began = time.monotonic()
        graded, dropped = _apply_and_grade(
            task, sandbox, patch, strict=strict, timeout=test_timeout
        )
        grading_seconds = time.monotonic() - began
    graded.grade_in = "fresh"
    if strict:
        graded.grading = GradingMode.STRICT.value
        graded.dropped = [change.to_dict() for change in dropped]
    return PatchVerdict(graded, flags_from_patch(task, patch), sandbox.usage, grading_seconds)


def _apply_and_grade(
    task: Task, sandbox: SandboxRuntime, patch: str, *, strict: bool, timeout: float
) -> tuple[GradeResult, list[DroppedChange]]:
    """Apply ``patch`` (or its allowed part) and grade; a 0 with the tool's word if it failed."""
    if strict:
        done = apply_strict(task, sandbox, patch)
        if done.refused or not done.applied:
            return refused_grade(done), done.dropped
        graded = grade_recorded(task, sandbox, timeout=timeout)
        return check_canary(sandbox, done, graded, timeout=timeout), done.dropped
    applied = sandbox.apply_patch(patch)
    if not applied:
        error = applied.message or "the patch does not apply"
        return grade(task, sandbox, timeout=timeout, patch_error=error), []
    graded = grade_benchmark(task, sandbox, patch_paths(patch), timeout=timeout)
    graded.applied_by = applied.method
    return graded, []


def grade_patch(
    row: Mapping[str, Any],
    patch: str | None,
    *,
    backend: str = "local",
    backend_options: Mapping[str, Any] | None = None,
    base_image: str | None = None,
    test_timeout: float = DEFAULT_TEST_TIMEOUT,
    grading: str = GradingMode.STRICT.value,
) -> GradeResult:
    """Apply ``patch`` to a fresh sandbox of the task ``row`` and grade it; says why on 0."""
    return judge_patch(
        row,
        patch,
        backend=backend,
        backend_options=backend_options,
        base_image=base_image,
        test_timeout=test_timeout,
        grading=grading,
    ).grade


def compute_score(
    data_source: str | None,
    solution_str: str,
    ground_truth: Any = None,
    extra_info: Mapping[str, Any] | str | None = None,
    *,
    retries: int = 1,
    details: bool = False,
    **settings: Any,
) -> float | dict[str, float | int]:
    """Verl's reward-function signature; the keywords are ``reward_kwargs``.

    ``retries``, ``details`` and ``settings`` (backend, backend_options, ...) come from
    ``custom_reward_function.reward_kwargs``. ``data_source`` and ``ground_truth`` are not
    needed: the task row in ``extra_info`` carries the tests that decide.  ``details=True``
    returns ``{"score": ..., ...}`` with the tamper flag and the accounting (see the module
    docstring).  Raises :class:`GradingError` when every attempt ended without a verdict.
    """
    if extra_info is None:
        raise ValueError("compute_score needs the task row as extra_info")
    row = json.loads(extra_info) if isinstance(extra_info, str) else extra_info
    patch = extract_patch(solution_str)
    verdict = PatchVerdict(GradeResult(None, "not graded"))
    for _attempt in range(1 + max(retries, 0)):
        try:
            verdict = judge_patch(row, patch, **settings)
        except SandboxError as exc:  # the sandbox's start, setup or patch step failed
            verdict = PatchVerdict(
                GradeResult(None, f"infrastructure error: {type(exc).__name__}: {exc}")
            )
        if not verdict.grade.is_error:
            score = verdict.grade.reward_or_raise()
            return {"score": score, **verdict.extra_info()} if details else score
    raise GradingError(verdict.grade)
