"""``run --group N``: N rollouts of one task from one prepared sandbox (GRPO's group).

GRPO samples a group of rollouts per task and compares their rewards; every rollout must
start from the same prepared state.  Replaying the setup N times costs N starts and N
setups; here the task's sandbox is started and prepared once (the repository at its commit,
the benchmark's setup), checkpointed, and each of the N rollouts is started from that
checkpoint (``SandboxRuntime.from_checkpoint``, the fork of docs/checkpoints.md) only when
one of the run's ``jobs`` slots is free to drive it: until then a rollout waits as the
checkpoint, which costs no sandbox-seconds, instead of as a started copy waiting for a CPU.
The run's slots bound every sandbox a group holds alive (the prepared source, the rollouts'
copies, their fresh grading copies), so ``--group N -j J`` never has more sandboxes running
than ``J`` independent runs would.  Each rollout runs its own agent in its own copy and is
graded there, or, where the task is graded fresh, in one more copy of the prepared state
(taken before any agent ran, so it is what a fresh setup would give, without running the
setup again), started in the same slot once the agent's copy is closed.

The rules of a single run hold per rollout: a copy that fails to start, or any other
infrastructure fault, is that rollout's error (no reward, never a 0) while the others go
on; ``--retries`` runs a failed rollout again in a new copy; each rollout's accounting is
its own sandboxes', and the one setup is counted once, on rollout 0 (``setups``).

A backend that cannot fork (it does not declare ``Capability.FORK``; the backend is asked,
never named) gets N independent runs, each with its own start and setup, and every outcome
says so (``group_mode: independent``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from sandbox_runtime._core.backend import Capability
from sandbox_runtime._core.checkpoints import Checkpoint
from sandbox_runtime._core.runtime import ForkResult, SandboxRuntime, delete_checkpoint
from sandbox_runtime._core.usage import SandboxUsage
from sandbox_runtime.errors import SandboxError
from sandbox_runtime.swe import lifetimes, tamper
from sandbox_runtime.swe.history import forget_history
from sandbox_runtime.swe.isolation import GradeIn
from sandbox_runtime.swe.prepare import prepare
from sandbox_runtime.swe.report import TaskOutcome
from sandbox_runtime.swe.runner import Runner, backend_capabilities
from sandbox_runtime.swe.task import Task

__all__ = ["FORK", "INDEPENDENT", "GroupRunner", "run_group"]

logger = logging.getLogger("sandbox_runtime.swe")

FORK = "fork"
INDEPENDENT = "independent"


@dataclass(frozen=True)
class _Prepared:
    """A task's prepared state, saved: what every rollout of its group starts from."""

    checkpoint: Checkpoint
    """The prepared state with its repository's history forgotten: what agents start from."""
    grading: Checkpoint | None
    """The prepared state as a fresh setup leaves it: what fresh grading starts from (``None``
    where the task is graded in the agent's sandbox)."""
    usage: SandboxUsage
    """The source sandbox's accounting: the group's one start and setup."""
    seconds: float


class GroupRunner(Runner):
    """A :class:`~sandbox_runtime.swe.runner.Runner` of ``RunOptions.group`` rollouts per task.

    Outcomes come back in task order, each task's rollouts in index order; ``on_done`` hears
    each rollout as its group finishes.
    """

    _runs_groups = True

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._slots = threading.Semaphore(max(1, self.options.jobs))

    def slots(self) -> threading.Semaphore:
        """The run's ``jobs`` slots: one per sandbox a group may hold alive at a time."""
        return self._slots

    def _task_outcomes(self, task: Task) -> list[TaskOutcome]:
        return run_group(self, task)

    def _agent_slots(self, task: Task) -> int:
        # Forked: one prepared source per task; else each rollout opens its own.
        return 1 if can_fork(self) else self.options.group

    def _prefetch_slots(self, task: Task) -> int:
        # A forked group's grading copies come from its checkpoint, never from the schedule.
        return 1 if can_fork(self) else super()._prefetch_slots(task)


def run_group(runner: Runner, task: Task) -> list[TaskOutcome]:
    """The ``runner.options.group`` outcomes of ``task``, in rollout order."""
    size = runner.options.group
    if not can_fork(runner):
        outcomes = _in_parallel(size, lambda index: runner._with_retries(task))
        return [_mark(outcome, index, INDEPENDENT) for index, outcome in enumerate(outcomes)]
    return _ForkedGroup(runner, task, size).run()


@contextmanager
def _slot(runner: Runner) -> Iterator[None]:
    """Hold one of the run's slots (a plain runner has none: no bound).

    A cancelled run stops waiting: the work that follows sees the cancel and ends at once.
    """
    slots = runner.slots() if isinstance(runner, GroupRunner) else None
    if slots is None:
        yield
        return
    held = False
    while not held and not runner.cancelled:
        held = slots.acquire(timeout=0.2)
    try:
        yield
    finally:
        if held:
            slots.release()


def can_fork(runner: Runner) -> bool:
    """Whether the run's backend forks (the backend is asked, never named)."""
    options = runner.options
    return Capability.FORK in backend_capabilities(options.backend, options.backend_options)


def _in_parallel(size: int, one: Callable[[int], TaskOutcome]) -> list[TaskOutcome]:
    """``one(index)`` for every rollout at once; results in index order."""
    with ThreadPoolExecutor(max_workers=size, thread_name_prefix="rollout") as pool:
        return list(pool.map(one, range(size)))


def _mark(outcome: TaskOutcome, index: int, mode: str) -> TaskOutcome:
    outcome.rollout = index
    outcome.group_mode = mode
    return outcome


class _ForkedGroup:
    """One task's group on a backend that forks: prepare once, start copies, run each."""

    def __init__(self, runner: Runner, task: Task, size: int) -> None:
        self.runner = runner
        self.task = task
        self.size = size
        config = runner._config(task)
        self.fields: dict[str, Any] = {
            **config.model_dump(exclude_unset=True, exclude={"options"}),
            "options": config.options,
        }
        self.prepared: _Prepared | None = None
        self._source_usage = SandboxUsage()

    def run(self) -> list[TaskOutcome]:
        """Every rollout's outcome; the saved state is deleted once no copy uses it."""
        began = time.monotonic()
        try:
            prepared = self.prepared = self._prepare()
        except Exception as exc:  # the one setup failed: every rollout is an error
            failed = self._all_failed(exc, time.monotonic() - began)
            failed[0].accounting = self._source_usage  # the failed setup was paid for too
            return failed
        try:
            outcomes = _in_parallel(self.size, self._rollout)
        finally:
            self._delete(prepared.checkpoint)
            if prepared.grading is not None:
                self._delete(prepared.grading)
        first = outcomes[0]
        first.accounting = prepared.usage + first.accounting
        first.setups += 1
        first.timings["setup"] = prepared.seconds
        return outcomes

    def _prepare(self) -> _Prepared:
        """Start the task's sandbox, set it up, save it; the source is closed afterwards.

        Saved twice where the task is graded fresh: first as the setup left it (what a fresh
        grading sandbox must hold: the prepared state, nothing more), then with the
        repository's history forgotten (``swe.history``, a trusted step before any agent),
        which every rollout's copy starts from, so that no copy pays for it again.
        """
        began = time.monotonic()
        used: list[SandboxRuntime] = []
        labels = {"sandbox-runtime-group": self.runner.run_id}
        grading: Checkpoint | None = None
        with _slot(self.runner):
            if self.runner.cancelled:
                raise SandboxError("cancelled")
            source = self.runner._open_sandbox(self.task, used, pooled=True)
            try:
                source.start()
                prepare(self.task, source)
                if self._grades_fresh():
                    grading = source.checkpoint(labels=labels)
                try:
                    source.base_commit(refresh=True)
                    forget_history(source)
                    checkpoint = source.checkpoint(labels=labels)
                except BaseException:
                    if grading is not None:
                        self._delete(grading)
                    raise
            finally:
                self.runner._release(self.task, source)
                self._source_usage = source.usage
        return _Prepared(checkpoint, grading, source.usage, time.monotonic() - began)

    def _grades_fresh(self) -> bool:
        """Whether this task's rollouts are graded in a fresh sandbox."""
        probe = self.runner._new_outcome(self.task)
        self.runner._resolve_grading(self.task, probe)
        return probe.grade_in == GradeIn.FRESH.value

    def _copies(self, n: int, checkpoint: Checkpoint | None = None) -> list[ForkResult]:
        """``n`` started copies of ``checkpoint`` (default: the agents' prepared state)."""
        assert self.prepared is not None, "copies come after the setup"
        start_from = checkpoint or self.prepared.checkpoint
        results = SandboxRuntime.from_checkpoint(start_from, n=n, **self.fields)
        if self.runner.cancelled:  # cancel() ran while they started: it could not see them
            for result in results:
                if result.sandbox is not None:
                    result.sandbox.close()
        return results

    def _all_failed(self, exc: Exception, seconds: float) -> list[TaskOutcome]:
        outcomes = []
        for index in range(self.size):
            outcome = self.runner._new_outcome(self.task)
            if not outcome.error:
                self.runner._failed(self.task, outcome, exc)
                outcome.reason = f"error: group setup: {outcome.error}"
            outcome.timings["total"] = seconds
            outcomes.append(_mark(outcome, index, FORK))
        outcomes[0].setups = 1
        return outcomes

    def _rollout(self, index: int) -> TaskOutcome:
        """Rollout ``index``: each attempt in a new copy, started once a slot is free."""

        def attempt() -> TaskOutcome:
            with _slot(self.runner):
                return self._attempt()

        return _mark(self.runner._with_retries(self.task, attempt), index, FORK)

    def _attempt(self) -> TaskOutcome:
        """One attempt in a new copy: act, grade (fresh: in another copy), close."""
        runner, task = self.runner, self.task
        outcome = runner._new_outcome(task)
        if outcome.error:
            return outcome
        began = time.monotonic()
        used: list[SandboxRuntime] = []
        sandbox: SandboxRuntime | None = None
        try:
            runner._resolve_grading(task, outcome)
            copy = self._copies(1)[0]
            runner._waited(outcome, time.monotonic() - began)
            if copy.sandbox is None:
                raise SandboxError(f"infrastructure error: the rollout's copy: {copy.error}")
            sandbox = copy.sandbox
            runner._track(sandbox, used)
            lifetimes.hold_lease(sandbox, lifetimes.grading_seconds(runner.options.test_timeout))
            outcome.sandbox_id = sandbox.id
            # The copy's repository knows only its base already (forgotten in the source).
            sandbox.base_commit(refresh=True)
            # The tamper baseline is each copy's own, taken after the copy was made.
            baseline = tamper.baseline_or_none(sandbox, task)
            runner._act_and_grade(
                task,
                sandbox,
                outcome,
                baseline,
                used,
                grading_copy=self._grading_copy,
            )
        except Exception as exc:
            runner._failed(task, outcome, exc)
        finally:
            if sandbox is not None:
                runner._release(task, sandbox)
            outcome.timings["total"] = time.monotonic() - began
            outcome.accounting = SandboxUsage.total(box.usage for box in used)
        return outcome

    def _grading_copy(self) -> SandboxRuntime:
        """A fresh grading sandbox: one more copy of the prepared state, started."""
        assert self.prepared is not None, "copies come after the setup"
        checkpoint = self.prepared.grading or self.prepared.checkpoint
        return self._copies(1, checkpoint)[0].unwrap()

    def _delete(self, checkpoint: Checkpoint) -> None:
        """Delete the group's saved state; one a backend keeps for now is left to expire."""
        try:
            delete_checkpoint(checkpoint, options=self.fields["options"])
        except SandboxError as exc:
            logger.warning(
                "group checkpoint %s of %s kept: %s", checkpoint.id, self.task.task_id, exc
            )
