"""Warm sandboxes for a run (``run --warm N``): one pool per distinct sandbox configuration.

Tasks of one repository at one image (RL rollouts of the same task, a benchmark's tasks
sharing an environment image) open identical sandboxes but for the task label (same image,
workdir, env and mounts); for those a
:class:`~sandbox_runtime.SandboxPool` starts up to N ahead, so a task finds its sandbox
started.  Each pool starts at most as many sandboxes as it has tasks (retries of a task
whose pool is used up start their own), so nothing is started for nobody; a task set where
every task has its own image gets no head start, only the same one start per task.

Pooled sandboxes carry the pool's label instead of the task's (labels are set at creation,
before the pool knows which task will take the sandbox).
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from sandbox_runtime._core.config import SandboxConfig
from sandbox_runtime._core.pool import Lease, SandboxPool
from sandbox_runtime.swe.task import Task

__all__ = ["TASK_LABEL", "WarmPools"]

#: The label the runner puts on a task's sandbox; not part of what makes two sandboxes alike.
TASK_LABEL = "sandbox-runtime.task"


def pool_key(task: Task) -> str:
    """What two tasks' sandboxes must share to come from one pool: everything but the task.

    Read from the task (the run's options are the same for all), so it is known before any
    image is resolved or built.
    """
    return json.dumps(
        [task.image, task.workdir, sorted(task.env.items()), sorted(task.mounts.items())]
    )


class WarmPools:
    """The pools of one run, made as tasks ask for them; see the module docstring."""

    def __init__(self, tasks: Sequence[Task], warm: int) -> None:
        if warm < 1:
            raise ValueError(f"warm must be at least 1, got {warm}")
        self._warm = warm
        self._demand = Counter(pool_key(task) for task in tasks)
        self._pools: dict[str, SandboxPool] = {}
        self._lock = threading.Lock()
        self._closed = False

    def acquire(self, task: Task, config: SandboxConfig) -> Lease:
        """A started sandbox for ``task``, whose own sandbox would be ``config``."""
        return self._pool(pool_key(task), config).acquire()

    def _pool(self, key: str, config: SandboxConfig) -> SandboxPool:
        with self._lock:
            pool = self._pools.get(key)
            if pool is None:
                demand = max(1, self._demand.get(key, 1))
                base = config.model_copy(
                    update={"labels": {k: v for k, v in config.labels.items() if k != TASK_LABEL}}
                )
                pool = SandboxPool(base, size=min(self._warm, demand), max_starts=demand)
                self._pools[key] = pool
                if self._closed:
                    pool.close()
                else:
                    pool.start()
            return pool

    def close(self) -> None:
        """Drain every pool: idle sandboxes closed, starts in flight waited for."""
        with self._lock:
            self._closed = True
            pools = list(self._pools.values())
        if pools:
            with ThreadPoolExecutor(max_workers=min(8, len(pools))) as closer:
                list(closer.map(SandboxPool.close, pools))
