"""Prefetch for a run (``run --prefetch K``): the tasks' sandboxes started K ahead, in order.

``--warm`` keeps N sandboxes per distinct configuration, which helps only where many tasks
share one; a run where every task has its own image gets no head start from it.  Here the
run's task order *is* the schedule: a :class:`~sandbox_runtime._core.prefetch.Prefetcher`
starts the next K sandboxes while earlier tasks run, whatever their images, one slot per
sandbox the run will open (a group's rollouts share their task's key, ``swe.warm.pool_key``).

A task graded in a fresh sandbox has that sandbox in the schedule too, after the agent
sandboxes of the tasks that run beside it (``lag``: the next ``jobs - 1``), which need
theirs at once while its grading waits for its agent's turns.  It is started while the
agent works, so grading does not wait for a start (it waits parked, holding a lease, which
costs its sandbox-seconds: the price of taking the start off the critical path).  A task
that ends before its grading gives its slot back
(:meth:`TaskPrefetcher.forgo`).  A group that forks takes its grading copies from its
checkpoint instead, so only its prepared source is scheduled.  Retries (``--retries``)
start on the spot as without prefetch.  Prefetched sandboxes carry no task label, as
pooled ones (it is set at creation, before the task that takes it is known); the key makes
sure the configuration is the task's.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Sequence

from sandbox_runtime._core.config import SandboxConfig
from sandbox_runtime._core.prefetch import Prefetcher, PrefetchSlot, PrefetchStats
from sandbox_runtime._core.runtime import SandboxRuntime
from sandbox_runtime.errors import SandboxError
from sandbox_runtime.swe.task import Task
from sandbox_runtime.swe.warm import TASK_LABEL, pool_key

__all__ = ["TaskPrefetcher"]

logger = logging.getLogger("sandbox_runtime.swe")

#: Background starts in flight at most: a cloud quota sees a trickle, not a storm.
MAX_IN_FLIGHT = 8
#: Seconds of random delay before each background start (strands-env #204: starts freed
#: together spread out).
JITTER = 0.2


def unlabelled(config: SandboxConfig) -> SandboxConfig:
    """``config`` without the task label: what any task of the same key can take."""
    labels = {key: value for key, value in config.labels.items() if key != TASK_LABEL}
    return config.model_copy(update={"labels": labels})


class TaskPrefetcher:
    """The run's prefetcher over its tasks: ``copies`` slots per task, or a count per task.

    A task's slots are its agents' (a group's rollouts) and its fresh grading sandboxes'.
    """

    def __init__(
        self,
        tasks: Sequence[Task],
        config_of: Callable[[Task], SandboxConfig],
        ahead: int,
        *,
        copies: int | Callable[[Task], int] = 1,
        later: Callable[[Task], int] | None = None,
        lag: int = 0,
    ) -> None:
        """Schedule ``copies`` slots per task; ``later`` of them after ``lag`` more tasks.

        ``later(task)``: how many of the task's slots it needs only after its agents' work
        (its fresh grading sandboxes); they are scheduled after the first slots of the next
        ``lag`` tasks (the run's ``jobs``: the tasks that start while it runs).
        """
        self._prefetcher = Prefetcher(
            ahead=ahead, max_in_flight=min(ahead, MAX_IN_FLIGHT), jitter=JITTER
        )
        self._prefetcher.extend(self._slots(tasks, config_of, copies, later, lag))

    @staticmethod
    def _slots(
        tasks: Sequence[Task],
        config_of: Callable[[Task], SandboxConfig],
        copies: int | Callable[[Task], int],
        later: Callable[[Task], int] | None,
        lag: int,
    ) -> list[PrefetchSlot]:
        slots: list[PrefetchSlot] = []
        held: deque[list[PrefetchSlot]] = deque()  # each task's later slots, in task order
        for task in tasks:
            try:
                config = unlabelled(config_of(task))
            except SandboxError:
                continue  # the task fails on its own when it runs; nothing to start for it
            count = copies(task) if callable(copies) else copies
            late = min(count, max(0, later(task))) if later is not None else 0
            key = pool_key(task)
            slots.extend(PrefetchSlot(key, config) for _ in range(count - late))
            held.append([PrefetchSlot(key, config) for _ in range(late)])
            if len(held) > lag:
                slots.extend(held.popleft())
        for rest in held:
            slots.extend(rest)
        return slots

    def take(self, task: Task, config: SandboxConfig) -> SandboxRuntime:
        """A started sandbox for ``task`` (whose own sandbox would be ``config``)."""
        return self._prefetcher.take(pool_key(task), unlabelled(config))

    def forgo(self, task: Task) -> None:
        """``task`` will not take one of its scheduled sandboxes (it ended before grading)."""
        self._prefetcher.forgo(pool_key(task))

    def stats(self) -> PrefetchStats:
        """The prefetcher's accounting."""
        return self._prefetcher.stats()

    def close(self) -> None:
        """Close what nobody took (a run cut short); logs how many."""
        left = self._prefetcher.close()
        if left:
            logger.info("closed %d prefetched sandboxes no task took", left)
