"""The main job: each task in a fresh sandbox, an agent acts, the tests grade it.

Tasks run in parallel threads (``jobs``); each gets its own sandbox, opened on the chosen
backend, prepared for its benchmark, handed to the agent, diffed, checked for changes to
what grading reads (:mod:`sandbox_runtime.swe.tamper`), graded and closed.  Grading runs in
the agent's sandbox or in a fresh one with only the agent's diff applied
(:mod:`sandbox_runtime.swe.isolation`; ``RunOptions.grade_in``, default: each benchmark's
own practice).  Each outcome sums the accounting of every sandbox the task used
(:mod:`sandbox_runtime._core.usage`), earlier attempts' included.  A
failure in one task (the image is missing, the sandbox died) becomes that task's outcome
with reward 0 and never stops the others.

Stopping cleanly: :meth:`Runner.cancel` (called on Ctrl-C) stops launching tasks, tells the
running agents to stop, and closes every sandbox the runner opened, from the calling thread,
so nothing is left behind even while workers are blocked in a command.  Every sandbox is
registered *before* it starts, so one that is still starting is closed as soon as it is up.
"""

from __future__ import annotations

import logging
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any

from sandbox_runtime._core.backend import Capability
from sandbox_runtime._core.config import SandboxConfig
from sandbox_runtime._core.ownership import default_run_id
from sandbox_runtime._core.pool import Lease
from sandbox_runtime._core.registry import load_backend
from sandbox_runtime._core.runtime import SandboxRuntime, validate_options
from sandbox_runtime._core.usage import SandboxUsage
from sandbox_runtime.errors import ConfigError, SandboxError
from sandbox_runtime.swe import lifetimes, tamper
from sandbox_runtime.swe.agents.base import Agent, AgentResult, Budget
from sandbox_runtime.swe.benchmark_checks import grade_benchmark, no_verdict_after_tampering
from sandbox_runtime.swe.bigfields import trajectory_task
from sandbox_runtime.swe.capture import ChangeSet, display_patch, read_change
from sandbox_runtime.swe.formats import load_format
from sandbox_runtime.swe.grading import DEFAULT_TEST_TIMEOUT, GradeResult
from sandbox_runtime.swe.history import forget_history
from sandbox_runtime.swe.images import resolve_image
from sandbox_runtime.swe.isolation import (
    GradeIn,
    grade_fresh,
    grade_fresh_changes,
    resolve_grade_in,
)
from sandbox_runtime.swe.prefetch import TaskPrefetcher
from sandbox_runtime.swe.prepare import prepare
from sandbox_runtime.swe.report import TaskOutcome
from sandbox_runtime.swe.strict import GradingMode, outside_changes, resolve_grading
from sandbox_runtime.swe.task import Task
from sandbox_runtime.swe.warm import TASK_LABEL, WarmPools

__all__ = ["RunOptions", "Runner", "task_sandbox_config"]

logger = logging.getLogger("sandbox_runtime.swe")


@dataclass
class RunOptions:
    """How to run a set of tasks."""

    backend: str = "local"
    jobs: int = 1
    max_steps: int | None = None
    """Overrides every task's own ``max_steps``; default 30 where the task names none."""
    step_timeout: float = 120.0
    time_limit: float | None = None
    test_timeout: float = DEFAULT_TEST_TIMEOUT
    run_id: str | None = None
    lifetime: float | None = None
    """Seconds a task's sandbox lives unless its lease extends it; ``None``: sized from the
    episode's budget (:func:`sandbox_runtime.swe.lifetimes.episode_lifetime`)."""
    max_lifetime: float | None = None
    """The hard cap no lease or extension passes (``SandboxConfig.max_lifetime``)."""
    base_image: str | None = None
    """Base of the bundled samples' Docker images."""
    backend_options: dict[str, Any] = field(default_factory=dict)
    retries: int = 0
    """Times a task that ended in an error (no reward) is run again, each in a fresh sandbox."""
    warm: int = 0
    """Sandboxes kept started ahead of the tasks per distinct sandbox configuration
    (``swe.warm``); 0 starts each task's sandbox when the task begins."""
    prefetch: int = 0
    """Sandboxes kept started ahead of the tasks in run order, whatever their configuration
    (``swe.prefetch``); 0: none.  Not together with ``warm``."""
    grade_in: str | None = None
    """``same``, ``fresh``, or ``None`` for each task's benchmark practice (see
    :mod:`sandbox_runtime.swe.isolation`)."""
    price: float | None = None
    """Price of one sandbox-second on this backend, for the reports' estimated cost."""
    grading: str = GradingMode.BENCHMARK.value
    """``benchmark`` (what the benchmark's harness lets through) or ``strict`` (only the
    change to non-test source, in a fresh sandbox; :mod:`sandbox_runtime.swe.strict`)."""
    group: int = 1
    """Rollouts per task (GRPO's group): above 1, each task's sandbox is prepared once and its
    rollouts are forked from it where the backend can fork (:mod:`sandbox_runtime.swe.group`)."""


def task_sandbox_config(
    task: Task, options: RunOptions, *, run_id: str | None = None
) -> SandboxConfig:
    """The sandbox a task runs in: its image resolved for the backend, its workdir and env.

    What the backend can do decides where the image comes from and whether the task's
    mounts are possible; the backend is asked, never named.
    """
    backend_options: dict[str, Any] = dict(options.backend_options)
    capabilities = backend_capabilities(options.backend, backend_options)
    if task.mounts and Capability.HOST_MOUNTS not in capabilities:
        raise SandboxError(
            f"task {task.task_id}: its mounts need a backend that binds host paths "
            f"(host_mounts), and {options.backend!r} does not"
        )
    return SandboxConfig(
        backend=options.backend,
        image=resolve_image(task, capabilities, base_image=options.base_image),
        workdir=task.workdir,
        env=dict(task.env),
        mounts=dict(task.mounts),
        # What the task's setup leaves outside the workdir (R2E-Gym's hidden tests) goes
        # into every saved state, or a copy graded on an archive-checkpoint backend has none.
        checkpoint_paths=list(load_format(task.format).prepared_paths(task)),
        exec_timeout=max(options.step_timeout, options.test_timeout),
        lifetime=options.lifetime or task_lifetime(task, options),
        max_lifetime=options.max_lifetime,
        run_id=run_id,
        labels={TASK_LABEL: task.task_id[:63]},
        options=backend_options,
    )


def task_steps(task: Task, options: RunOptions) -> int:
    """The steps an agent may take on ``task``."""
    return options.max_steps or task.max_steps or 30


def task_lifetime(task: Task, options: RunOptions) -> float:
    """A task sandbox's lifetime sized from its episode's budget (``swe.lifetimes``)."""
    return lifetimes.episode_lifetime(
        task_steps(task, options), options.step_timeout, options.time_limit, options.test_timeout
    )


def backend_capabilities(backend: str, options: dict[str, Any]) -> frozenset[Capability]:
    """What sandboxes of ``backend`` opened with ``options`` can do."""
    backend_cls = load_backend(backend)
    config = SandboxConfig(backend=backend, options=options)
    return backend_cls.capabilities_for(validate_options(config, backend_cls))


class Runner:
    """Runs tasks with an agent; see the module docstring."""

    #: Whether this runner runs ``RunOptions.group`` rollouts per task (``GroupRunner``).
    _runs_groups = False

    def __init__(
        self,
        tasks: Sequence[Task],
        agent_factory: Callable[[], Agent],
        options: RunOptions,
        *,
        on_done: Callable[[TaskOutcome], None] | None = None,
        agent_name: str = "",
    ) -> None:
        if options.group > 1 and not self._runs_groups:
            raise ConfigError(
                f"group={options.group}: run groups with sandbox_runtime.swe.group.GroupRunner"
            )
        if options.prefetch and options.warm:
            raise ConfigError("--prefetch and --warm both start sandboxes ahead: choose one")
        self.tasks = list(tasks)
        self.agent_factory = agent_factory
        self.options = options
        self.on_done = on_done
        self.agent_name = agent_name
        self.run_id = options.run_id or f"swe-{default_run_id()}"
        self._cancel = threading.Event()
        self._lock = threading.Lock()
        self._open: dict[int, SandboxRuntime] = {}
        self._pools: WarmPools | None = None
        self._leases: dict[int, Lease] = {}
        #: Fresh grading sandboxes each task took from the prefetch schedule.
        self._graded_from_schedule: dict[str, int] = {}
        self._prefetch: TaskPrefetcher | None = None

    @property
    def cancelled(self) -> bool:
        """True once :meth:`cancel` was called."""
        return self._cancel.is_set()

    def cancel(self) -> int:
        """Stop launching, stop agents, close every open sandbox; returns how many closed."""
        self._cancel.set()
        if self._pools is not None:
            self._pools.close()  # workers waiting in acquire() get SandboxClosedError
        if self._prefetch is not None:
            self._prefetch.close()  # likewise for take()
        with self._lock:
            sandboxes = list(self._open.values())
        for sandbox in sandboxes:
            try:
                sandbox.close()
            except SandboxError as exc:
                logger.warning("closing sandbox %s failed: %s", sandbox.id, exc)
        return len(sandboxes)

    def run(self) -> list[TaskOutcome]:
        """Run every task; outcomes come back in task order.

        ``KeyboardInterrupt`` cancels (see :meth:`cancel`), waits briefly for the workers to
        notice, and propagates.
        """
        outcomes: dict[int, list[TaskOutcome]] = {}
        self._warn_about_caps()
        if self.options.warm > 0:
            self._pools = WarmPools(self.tasks, self.options.warm)
        if self.options.prefetch > 0:
            self._prefetch = TaskPrefetcher(
                self.tasks,
                self._config,
                self.options.prefetch,
                copies=self._prefetch_slots,
                later=lambda task: self._prefetch_slots(task) - self._agent_slots(task),
                lag=max(0, self.options.jobs - 1),
            )
        executor = ThreadPoolExecutor(max_workers=max(1, self.options.jobs))
        futures: dict[Future[list[TaskOutcome]], int] = {
            executor.submit(self._settled_outcomes, task): index
            for index, task in enumerate(self.tasks)
        }
        pending = set(futures)
        try:
            while pending:
                done, pending = wait(pending, timeout=0.2, return_when=FIRST_COMPLETED)
                for future in done:
                    outcomes[futures[future]] = future.result()
                    for outcome in outcomes[futures[future]]:
                        if self.on_done is not None:
                            self.on_done(outcome)
        except BaseException:
            self.cancel()
            for future in pending:
                future.cancel()
            wait(pending, timeout=30)
            self.cancel()  # a sandbox that was still starting a moment ago
            raise
        finally:
            executor.shutdown(wait=False, cancel_futures=True)
            if self._pools is not None:
                self._pools.close()
            if self._prefetch is not None:
                self._prefetch.close()
        return [outcome for index in sorted(outcomes) for outcome in outcomes[index]]

    def _task_outcomes(self, task: Task) -> list[TaskOutcome]:
        """One task's outcomes (a group's runner gives one per rollout)."""
        return [self._with_retries(task)]

    def _settled_outcomes(self, task: Task) -> list[TaskOutcome]:
        """:meth:`_task_outcomes`, then the task's unused grading slots given back."""
        try:
            return self._task_outcomes(task)
        finally:
            if self._prefetch is not None:
                scheduled = self._prefetch_slots(task) - self._agent_slots(task)
                with self._lock:
                    taken = self._graded_from_schedule.pop(task.task_id, 0)
                for _ in range(max(0, scheduled - taken)):
                    self._prefetch.forgo(task)

    def _agent_slots(self, task: Task) -> int:
        """Sandboxes ``task``'s agents open through the schedule (first tries)."""
        return 1

    def _prefetch_slots(self, task: Task) -> int:
        """Slots of the schedule for ``task``: its agents', and its fresh grading sandboxes'."""
        return self._agent_slots(task) * (2 if self._grades_fresh(task) else 1)

    def _grades_fresh(self, task: Task) -> bool:
        """Whether ``task`` is graded in a fresh sandbox (strict grading always is)."""
        return self._where_graded(task)[1] is GradeIn.FRESH

    def _warn_about_caps(self) -> None:
        """Say once, up front, when a backend's hard cap would cut the longest episode."""
        if not self.tasks:
            return
        longest = max(self.tasks, key=lambda task: task_lifetime(task, self.options))
        try:
            config = self._config(longest)
        except SandboxError:
            return  # the task's own error comes when it runs
        # What the episode may need, whatever the first lifetime: leases extend up to it.
        warning = lifetimes.cap_warning(config, task_lifetime(longest, self.options))
        if warning:
            logger.warning("%s", warning)

    def _config(self, task: Task) -> SandboxConfig:
        return task_sandbox_config(task, self.options, run_id=self.run_id)

    def _budget(self, task: Task) -> Budget:
        steps = task_steps(task, self.options)
        return Budget(
            max_steps=steps,
            step_timeout=self.options.step_timeout,
            time_limit=self.options.time_limit,
            cancel=self._cancel,
        )

    def _with_retries(
        self, task: Task, attempt: Callable[[], TaskOutcome] | None = None
    ) -> TaskOutcome:
        """The task's outcome, run again in a fresh sandbox while it ends in an error.

        Only errors are retried (an infrastructure fault, an agent crash), never a graded 0:
        a task's tests decide once.  Each earlier attempt's error stays in ``attempts``.
        ``attempt`` runs one attempt (default: :meth:`_one`, a fresh sandbox each time).
        """
        earlier: list[str] = []
        spent = SandboxUsage()
        setups = 0
        while True:
            outcome = (attempt or (lambda: self._one(task)))()
            # Every attempt's sandboxes were paid for: the accounting covers them all.
            spent = outcome.accounting = spent + outcome.accounting
            setups = outcome.setups = setups + outcome.setups
            if outcome.outcome != "error" or self.cancelled or len(earlier) >= self.options.retries:
                outcome.attempts = [
                    *earlier,
                    *([outcome.error or outcome.reason] if earlier else []),
                ]
                return outcome
            earlier.append(outcome.error or outcome.reason)
            logger.warning(
                "task %s ended in an error (%s); running it again (%d of %d)",
                task.task_id,
                outcome.error,
                len(earlier),
                self.options.retries,
            )

    def _open_sandbox(
        self, task: Task, used: list[SandboxRuntime], *, pooled: bool = False
    ) -> SandboxRuntime:
        """A sandbox for ``task``, tracked (before it starts) so that cancel closes it.

        ``pooled``: taken from the run's warm pools or prefetcher when ``--warm`` or
        ``--prefetch`` made them (already started).  ``used`` collects the task's sandboxes,
        whose accounting the outcome sums.
        """
        lease: Lease | None = None
        if pooled and self._pools is not None:
            lease = self._pools.acquire(task, self._config(task))
            sandbox = lease.sandbox
        elif pooled and self._prefetch is not None:
            sandbox = self._prefetch.take(task, self._config(task))
        else:
            sandbox = SandboxRuntime(self._config(task))
        self._track(sandbox, used)
        if lease is not None:
            with self._lock:
                self._leases[id(sandbox)] = lease
        return sandbox

    def _open_fresh(self, task: Task, used: list[SandboxRuntime]) -> SandboxRuntime:
        """A fresh grading sandbox: the one the prefetch schedule started for it, if any."""
        if self._prefetch is None:
            return self._open_sandbox(task, used)
        with self._lock:
            taken = self._graded_from_schedule.get(task.task_id, 0)
            self._graded_from_schedule[task.task_id] = taken + 1
        return self._open_sandbox(task, used, pooled=True)

    def _track(self, sandbox: SandboxRuntime, used: list[SandboxRuntime]) -> None:
        """Count ``sandbox`` in the task's accounting, and let :meth:`cancel` close it."""
        used.append(sandbox)
        with self._lock:
            self._open[id(sandbox)] = sandbox

    def _release(self, task: Task, sandbox: SandboxRuntime) -> None:
        """Close ``sandbox`` (a pooled one through its lease); harmless to call twice."""
        with self._lock:
            lease = self._leases.pop(id(sandbox), None)
        try:
            if lease is not None:
                lease.release()
            else:
                sandbox.close()
        except SandboxError as exc:
            logger.warning("closing sandbox of %s failed: %s", task.task_id, exc)
        with self._lock:
            self._open.pop(id(sandbox), None)

    def _new_outcome(self, task: Task) -> TaskOutcome:
        """An empty outcome of ``task`` ("cancelled" when the run was cancelled)."""
        outcome = TaskOutcome(
            task_id=task.task_id,
            format=task.format,
            repo=task.repo,
            backend=self.options.backend,
            agent=self.agent_name,
            task_row=trajectory_task(task.row_format or task.format, task.source, task.origin),
            price=self.options.price,
        )
        if self._cancel.is_set():
            outcome.reason = outcome.error = "cancelled"
        return outcome

    def _waited(self, outcome: TaskOutcome, seconds: float) -> None:
        """Add ``seconds`` the task's worker waited for a sandbox to be up (``sandbox_wait``).

        The start of its agent's sandbox (or taking a warm or prefetched one, or forking a
        copy) and of a fresh grading sandbox: the time the task stood still for sandboxes,
        on its critical path (setup, agent and tests excluded).
        """
        outcome.timings["sandbox_wait"] = outcome.timings.get("sandbox_wait", 0.0) + seconds

    def _resolve_grading(self, task: Task, outcome: TaskOutcome) -> None:
        """Set how and where ``outcome`` is graded (strict grading always grades fresh)."""
        grading, grade_in = self._where_graded(task)
        outcome.grading, outcome.grade_in = grading.value, grade_in.value

    def _where_graded(self, task: Task) -> tuple[GradingMode, GradeIn]:
        grading = resolve_grading(self.options.grading, self.options.grade_in)
        if grading is GradingMode.STRICT:
            return grading, GradeIn.FRESH
        return grading, resolve_grade_in(task, self.options.grade_in)

    def _failed(self, task: Task, outcome: TaskOutcome, exc: Exception) -> None:
        """Turn an exception into the outcome's error: no reward, never a 0."""
        if self._cancel.is_set():
            outcome.reason = outcome.error = "cancelled"
        else:
            logger.debug("task %s failed:\n%s", task.task_id, traceback.format_exc())
            outcome.error = f"{type(exc).__name__}: {exc}"
            outcome.reason = f"error: {outcome.error}"
        outcome.reward = None

    def _one(self, task: Task) -> TaskOutcome:
        outcome = self._new_outcome(task)
        if outcome.error:
            return outcome
        began = time.monotonic()
        sandbox: SandboxRuntime | None = None
        used: list[SandboxRuntime] = []
        try:
            self._resolve_grading(task, outcome)
            sandbox = self._open_sandbox(task, used, pooled=True)
            sandbox.start()
            self._waited(outcome, time.monotonic() - began)
            grading = lifetimes.grading_seconds(self.options.test_timeout)
            lifetimes.hold_lease(sandbox, grading)
            outcome.sandbox_id = sandbox.id
            outcome.setups += 1
            prepare(task, sandbox)
            sandbox.base_commit(refresh=True)
            forget_history(sandbox)  # no later commit holds the fix (swe.history)
            baseline = tamper.baseline_or_none(sandbox, task)
            outcome.timings["setup"] = time.monotonic() - began
            self._act_and_grade(task, sandbox, outcome, baseline, used)
        except Exception as exc:
            self._failed(task, outcome, exc)
        finally:
            if sandbox is not None:
                self._release(task, sandbox)
            outcome.timings["total"] = time.monotonic() - began
            outcome.accounting = SandboxUsage.total(box.usage for box in used)
        return outcome

    def _act_and_grade(
        self,
        task: Task,
        sandbox: SandboxRuntime,
        outcome: TaskOutcome,
        baseline: tamper.Baseline | None,
        used: list[SandboxRuntime],
        *,
        grading_copy: Callable[[], SandboxRuntime] | None = None,
    ) -> None:
        """Run the agent in the prepared ``sandbox``, then grade where the task is graded.

        ``grading_copy``: where a fresh grading sandbox comes from already prepared (a group's
        fork of its prepared sandbox); without it, one is started and prepared.
        """
        attempted = self._attempt(task, sandbox, outcome, baseline)
        if attempted is None:
            return
        result, changes = attempted
        if outcome.grade_in == GradeIn.FRESH.value:
            # The agent's sandbox is no longer needed: free it before the next starts.
            self._release(task, sandbox)
        else:
            # Never let the sandbox holding the ungraded patch end before grading does.
            lifetimes.ensure_remaining(
                sandbox, lifetimes.grading_seconds(self.options.test_timeout)
            )
        self._grade(
            task, sandbox, outcome, result, used, grading_copy=grading_copy, changes=changes
        )

    def _attempt(
        self,
        task: Task,
        sandbox: SandboxRuntime,
        outcome: TaskOutcome,
        baseline: tamper.Baseline | None,
    ) -> tuple[AgentResult, ChangeSet | None] | None:
        """Run the agent and read what it changed, from outside its sandbox; ``None`` if cancelled.

        The change set (``None`` when it could not be read) is what fresh grading applies;
        the tamper flags come from the same reading.
        """
        agent = self.agent_factory()
        began = time.monotonic()
        before = sandbox.usage
        result: AgentResult = agent.run(task, sandbox, self._budget(task))
        outcome.timings["agent"] = time.monotonic() - began
        outcome.agent_accounting = sandbox.usage.since(before)
        outcome.steps = result.steps
        outcome.submitted = result.submitted
        outcome.stop_reason = result.stop_reason
        outcome.usage = result.usage
        outcome.notes = list(result.notes)
        if self._cancel.is_set():
            outcome.reason = outcome.error = "cancelled"
            return None
        changes, found, problem = read_change(sandbox, baseline)
        if changes is None or outcome.grade_in != GradeIn.FRESH.value:
            outcome.patch = display_patch(sandbox, changes)
        if result.error:
            outcome.error = result.error
        outcome.tamper = tamper.audit(task, sandbox.workdir, baseline, found, problem)
        return result, changes

    def _grade(
        self,
        task: Task,
        sandbox: SandboxRuntime,
        outcome: TaskOutcome,
        result: AgentResult,
        used: list[SandboxRuntime],
        *,
        grading_copy: Callable[[], SandboxRuntime] | None = None,
        changes: ChangeSet | None = None,
    ) -> None:
        """Grade where the task is graded, and turn the result into the outcome's reward."""
        began = time.monotonic()
        graded: GradeResult
        if outcome.grade_in == GradeIn.FRESH.value:
            graded = self._grade_fresh(task, outcome, result, used, grading_copy, changes)
        else:
            graded = grade_benchmark(
                task,
                sandbox,
                changes.written if changes else (),
                timeout=self.options.test_timeout,
                patch_error=result.patch_error,
            )
            graded = no_verdict_after_tampering(graded, outcome.tamper)
        graded.grade_in = outcome.grade_in
        if outcome.grading == GradingMode.STRICT.value:
            graded.dropped += [change.to_dict() for change in outside_changes(outcome.tamper)]
        outcome.dropped = list(graded.dropped)
        outcome.timings["grade"] = time.monotonic() - began
        outcome.grade = graded
        outcome.reward = graded.reward
        outcome.reason = graded.reason
        if graded.is_error:
            outcome.error = outcome.error or graded.reason
        if result.error and not graded.resolved:
            # The agent crashed: its attempt says nothing about the model, so no reward
            # (a fix it finished before crashing still counts).
            outcome.reward = None
            outcome.reason = f"{graded.reason} (agent error: {result.error})"

    def _grade_fresh(
        self,
        task: Task,
        outcome: TaskOutcome,
        result: AgentResult,
        used: list[SandboxRuntime],
        grading_copy: Callable[[], SandboxRuntime] | None,
        changes: ChangeSet | None = None,
    ) -> GradeResult:
        """Grade the agent's diff in a fresh sandbox: a prepared copy, or one set up now."""
        fresh: SandboxRuntime
        began = time.monotonic()
        try:
            if grading_copy is None:
                fresh = self._open_fresh(task, used)
                outcome.setups += 1
            else:
                fresh = grading_copy()
                self._track(fresh, used)
        except SandboxError as exc:
            return GradeResult(None, f"infrastructure error: grading copy: {exc}")
        if grading_copy is None:
            try:  # started here so that its start counts as waiting (sandbox_wait)
                fresh.start()
            except SandboxError as exc:
                self._release(task, fresh)
                error = f"infrastructure error: fresh sandbox: {type(exc).__name__}: {exc}"
                return GradeResult(None, error)
            finally:
                self._waited(outcome, time.monotonic() - began)
        else:
            self._waited(outcome, time.monotonic() - began)
        strict = outcome.grading == GradingMode.STRICT.value
        try:
            if changes is not None and result.patch_error is None:
                graded, shown = grade_fresh_changes(
                    task,
                    fresh,
                    changes,
                    timeout=self.options.test_timeout,
                    strict=strict,
                    prepared=grading_copy is not None,
                )
                # What the grading sandbox was given, as trusted code renders it.
                outcome.patch = shown if shown is not None else outcome.patch
                return graded
            return grade_fresh(
                task,
                fresh,
                outcome.patch,
                timeout=self.options.test_timeout,
                patch_error=result.patch_error,
                strict=strict,
                prepared=grading_copy is not None,
            )
        finally:
            self._release(task, fresh)
