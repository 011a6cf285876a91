"""Prepared task states shared by the rollouts of a group: one setup per task, then copies.

A trainer that samples a group of rollouts per task (GRPO; rLLM main interleaves each task
``group_size`` times and runs the copies at once) would start and set up the task's sandbox
once per rollout.  :class:`PreparedStates` sets it up once: the first rollout of a task starts
a sandbox, prepares it (:func:`~sandbox_runtime.swe.prepare.prepare`), saves it as a
checkpoint and closes it; every rollout, the first included, and every fresh grading sandbox
then starts from that checkpoint (``SandboxRuntime.from_checkpoint``), prepared already.
Rollouts of one task that ask at once wait for the one setup; other tasks go on.

Where the backend does not declare ``Capability.FORK`` (asked, never named) each call starts
and prepares a sandbox as before, and :attr:`PreparedStates.setups` counts them all.  A
checkpoint that is gone (reaped, expired) is made again.  At most ``max_states`` are kept;
the oldest is deleted when one more is made, and :meth:`PreparedStates.close` deletes the
rest (one a running copy still uses is left to expire with its lifetime, or to ``reap``).
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from sandbox_runtime._core.backend import Capability
from sandbox_runtime._core.checkpoints import Checkpoint
from sandbox_runtime._core.config import SandboxConfig
from sandbox_runtime._core.runtime import SandboxRuntime, delete_checkpoint
from sandbox_runtime._core.shutdown import track
from sandbox_runtime.errors import CheckpointNotFoundError, SandboxError
from sandbox_runtime.swe.prepare import prepare
from sandbox_runtime.swe.runner import RunOptions, backend_capabilities, task_sandbox_config
from sandbox_runtime.swe.task import Task

__all__ = ["PreparedStates"]

logger = logging.getLogger("sandbox_runtime.swe")


@dataclass
class _State:
    lock: threading.Lock = field(default_factory=threading.Lock)
    checkpoint: Checkpoint | None = None
    options: dict[str, Any] = field(default_factory=dict)
    """The backend's options, which deleting the checkpoint needs (a base directory...)."""


class PreparedStates:
    """Started, prepared sandboxes for tasks, each task set up once where the backend forks."""

    def __init__(self, *, max_states: int = 64) -> None:
        if max_states < 1:
            raise ValueError(f"max_states must be at least 1, got {max_states}")
        self.max_states = max_states
        self.setups = 0
        """Setups run so far (one per task where the backend forks, else one per sandbox)."""
        self.copies = 0
        """Sandboxes started from a saved state so far."""
        self._lock = threading.Lock()
        self._states: OrderedDict[str, _State] = OrderedDict()
        # A SIGTERM'd process deletes the saved states after its sandboxes (_core/shutdown.py).
        track(self, tier=1)

    def open(self, task: Task, options: RunOptions) -> SandboxRuntime:
        """A started sandbox of ``task``, prepared; the caller owns it (close it)."""
        config = task_sandbox_config(task, options)
        if Capability.FORK not in backend_capabilities(options.backend, options.backend_options):
            return self._started_and_prepared(task, config)
        # The state does not depend on how long a copy may live: an episode's sandbox and a
        # grading sandbox (lifetimes sized apart, docs/leases.md) share one setup.
        state_fields = config.model_dump_json(
            exclude={"labels", "run_id", "lifetime", "max_lifetime"}
        )
        key = f"{task.task_id}\0{state_fields}"
        fields: dict[str, Any] = {
            **config.model_dump(exclude_unset=True, exclude={"options"}),
            "options": config.options,
        }
        for _ in range(2):  # once more when the saved state was reaped meanwhile
            checkpoint = self._checkpoint(key, task, config)
            try:
                [result] = SandboxRuntime.from_checkpoint(checkpoint, n=1, **fields)
                sandbox = result.unwrap()
            except CheckpointNotFoundError:
                self._forget(key, checkpoint)
                continue
            with self._lock:
                self.copies += 1
            return sandbox
        raise SandboxError(f"task {task.task_id}: its prepared state vanished twice while in use")

    def close(self) -> None:
        """Delete every saved state (one still in use is left to expire)."""
        with self._lock:
            states, self._states = list(self._states.values()), OrderedDict()
        for state in states:
            _delete(state)

    def __enter__(self) -> PreparedStates:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _started_and_prepared(self, task: Task, config: SandboxConfig) -> SandboxRuntime:
        sandbox = SandboxRuntime(config)
        try:
            sandbox.start()
            with self._lock:
                self.setups += 1
            prepare(task, sandbox)
        except BaseException:
            sandbox.close()
            raise
        return sandbox

    def _checkpoint(self, key: str, task: Task, config: SandboxConfig) -> Checkpoint:
        """The task's saved state, made now by the first caller (the others wait for it)."""
        with self._lock:
            state = self._states.get(key)
            if state is None:
                state = self._states[key] = _State()
            self._states.move_to_end(key)
            evicted = self._evict()
        for old in evicted:
            _delete(old)
        with state.lock:
            if state.checkpoint is None:
                state.options = dict(config.options)
                source = self._started_and_prepared(task, config)
                try:
                    state.checkpoint = source.checkpoint(labels={"sandbox-runtime-prepared": "1"})
                finally:
                    source.close()
            return state.checkpoint

    def _evict(self) -> list[_State]:
        """Drop the oldest states past ``max_states`` (called under the lock)."""
        dropped = []
        while len(self._states) > self.max_states:
            dropped.append(self._states.popitem(last=False)[1])
        return dropped

    def _forget(self, key: str, checkpoint: Checkpoint) -> None:
        with self._lock:
            state = self._states.get(key)
            if state is not None and state.checkpoint == checkpoint:
                state.checkpoint = None


def _delete(state: _State) -> None:
    """Delete a state's checkpoint, if it has one; one still in use is left to expire."""
    if state.checkpoint is None:
        return
    try:
        delete_checkpoint(state.checkpoint, options=state.options)
    except CheckpointNotFoundError:
        pass
    except SandboxError as exc:
        logger.info("prepared state %s kept for now: %s", state.checkpoint.id, exc)
