"""mini-swe-agent's environment on every backend of this library.

mini-swe-agent (``pip install mini-swe-agent``) runs an agent's shell commands through an
*environment*: an object with ``execute(action, cwd="", *, timeout=None) -> dict``,
``get_template_vars(**kwargs) -> dict`` and ``serialize() -> dict``, chosen in its config by
a short name or any dotted path (``environment.environment_class``).  Its own environments
are docker, podman, singularity, bubblewrap and SWE-ReX; :class:`SandboxRuntimeEnvironment`
is one more, over a :class:`~sandbox_runtime.SandboxRuntime`, so the same YAML reaches local,
docker, kubernetes, AGS, e2b or any installed backend::

    environment:
      environment_class: sandbox_runtime.integrations.minisweagent.SandboxRuntimeEnvironment
      backend: docker
      image: python:3.12
      cwd: /testbed

or, for a task of this library (the sandbox prepared as ``sandbox-runtime run`` prepares it)::

    environment:
      environment_class: sandbox_runtime.integrations.minisweagent.SandboxRuntimeEnvironment
      backend: local
      task_source: bundled:r2e
      task_id: csvline__c2144404831e

What it does as mini-swe-agent's own environments do: a command runs in a fresh shell
(``interpreter``, default ``bash -lc``) in ``cwd`` with ``env`` and the host variables named
in ``forward_env``; stdout and stderr come back as one ``output``; a command that outlives its
timeout is killed (its whole process group) and reported with ``returncode`` -1 and an
``exception_info``; an output whose first line is ``COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT``
with exit 0 raises mini-swe-agent's ``Submitted`` with the rest as the submission.

Where it differs, on purpose: a sandbox that is gone or a backend that fails raises
:class:`~sandbox_runtime.SandboxError` out of ``execute`` (the agent's run ends with that
error as its exit status) instead of becoming an observation the model reads, since it says
nothing about the model's command.  The sandbox is removed by :meth:`~SandboxRuntimeEnvironment.
close` (also ``cleanup``, and a ``with`` block), else when the interpreter exits; one whose
process was killed is found by ``sandbox-runtime reap`` when its owner is gone or its lifetime
is over.  The template variables ``system``, ``release``, ``version`` and ``machine``
describe the sandbox's kernel and machine (``uname``), not the host's.
"""

from __future__ import annotations

import json
import os
import shlex
import weakref
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import Field

from sandbox_runtime._core.config import SandboxConfig, mask_secrets
from sandbox_runtime._core.results import ExecResult
from sandbox_runtime._core.runtime import SandboxRuntime
from sandbox_runtime.errors import ConfigError
from sandbox_runtime.integrations._harness_tasks import (
    grade_patch,
    load_task,
    new_run_id,
    open_prepared,
    task_config,
)
from sandbox_runtime.integrations._sandbox_config import HarnessSandboxFieldsWithEnv
from sandbox_runtime.swe.grading import DEFAULT_TEST_TIMEOUT, GradeResult

__all__ = [
    "HARNESS_NAME",
    "SUBMIT_MARKER",
    "SandboxRuntimeEnvironment",
    "SandboxRuntimeEnvironmentConfig",
    "grade_trajectory",
]

#: The value of the ``harness`` label on this environment's sandboxes.
HARNESS_NAME = "mini-swe-agent"
#: The first output line by which mini-swe-agent's prompts make the agent submit.
SUBMIT_MARKER = "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"
_UNAME_FIELDS = ("system", "node", "release", "version", "machine")


class SandboxRuntimeEnvironmentConfig(HarnessSandboxFieldsWithEnv):
    """The ``environment:`` keys of a mini-swe-agent config that uses this environment.

    The sandbox keys are every harness adapter's (:mod:`._sandbox_config`): ``image`` and
    ``workdir`` are ignored with ``task_source`` (the task names its own), ``env`` reaches
    every command (over the task's own).
    """

    cwd: str = ""
    """Where commands run; default: the sandbox's workdir (the task's, with a task)."""
    forward_env: list[str] = Field(default_factory=list)
    """Host variables passed on to every command when set on the host (``env`` wins)."""
    timeout: int = 30
    """Seconds a command may run unless ``execute`` is given another timeout."""
    interpreter: list[str] = Field(default_factory=lambda: ["bash", "-lc"])
    """The command line that runs an action; the action's text is appended as one argument."""
    task_source: str | None = None
    """A task source of this library (``bundled``, ``bundled:r2e``, a JSONL or parquet file)."""
    task_id: str | None = None
    """The task of ``task_source`` whose prepared sandbox this environment is."""
    base_image: str | None = None
    """Base image of the bundled samples' Docker images (``sandbox-runtime run --base-image``)."""


class SandboxRuntimeEnvironment:
    """mini-swe-agent's environment protocol over one sandbox of this library."""

    def __init__(
        self, *, config_class: type = SandboxRuntimeEnvironmentConfig, **kwargs: Any
    ) -> None:
        """Open (start, and prepare for a task) the sandbox the config describes."""
        self.config: SandboxRuntimeEnvironmentConfig = config_class(**kwargs)
        self.run_id = new_run_id()
        self.sandbox = self._open()
        self._closer = weakref.finalize(self, self.sandbox.close)
        try:
            self._uname = self._read_uname()
        except BaseException:
            self.close()
            raise

    def _labels(self) -> dict[str, str]:
        return self.config.run_labels(HARNESS_NAME, self.run_id)

    def _open(self) -> SandboxRuntime:
        cfg = self.config
        if (cfg.task_source is None) != (cfg.task_id is None):
            raise ConfigError("environment: task_source and task_id go together")
        if cfg.task_source is not None and cfg.task_id is not None:
            task = load_task(cfg.task_source, cfg.task_id)
            config = task_config(
                task,
                backend=cfg.backend,
                backend_options=cfg.backend_options,
                base_image=cfg.base_image,
                labels=self._labels(),
            )
            config = config.model_copy(
                update={"lifetime": SandboxConfig(lifetime=cfg.lifetime).lifetime}
            )
            return open_prepared(task, config)
        return SandboxRuntime(cfg.sandbox_config(self._labels())).start()

    def _read_uname(self) -> dict[str, str]:
        flags = ("-s", "-n", "-r", "-v", "-m")
        script = "; ".join(f"uname {flag}" for flag in flags)
        result = self.sandbox.exec(["sh", "-c", script], timeout=30)
        lines = result.stdout.splitlines() if result.exit_code == 0 else []
        if len(lines) != len(flags):
            return {}
        return dict(zip(_UNAME_FIELDS, lines, strict=True))

    def _env(self) -> dict[str, str]:
        forwarded = {key: os.environ[key] for key in self.config.forward_env if key in os.environ}
        return {**forwarded, **self.config.env}

    def execute(
        self, action: Mapping[str, Any], cwd: str = "", *, timeout: int | None = None
    ) -> dict[str, Any]:
        """Run ``action["command"]`` and return mini-swe-agent's output dict.

        Raises mini-swe-agent's ``Submitted`` when the output submits, and
        :class:`~sandbox_runtime.SandboxError` when the sandbox cannot run the command.
        """
        command = str(action.get("command", ""))
        limit = timeout or self.config.timeout
        # One stream, in order, as a terminal (and mini-swe-agent's own environments) shows it.
        argv = ["sh", "-c", 'exec 2>&1; exec "$@"', "sh", *self.config.interpreter, command]
        result = self.sandbox.exec(
            argv, cwd=cwd or self.config.cwd or None, env=self._env(), timeout=limit
        )
        output = _output(result, limit)
        _check_submitted(output)
        return output

    def get_template_vars(self, **kwargs: Any) -> dict[str, Any]:
        """The config, the sandbox's ``uname`` fields and the sandbox's id, then ``kwargs``."""
        from minisweagent.utils.serialize import recursive_merge

        own = {"sandbox_id": self.sandbox.id, "cwd": self.config.cwd or self.sandbox.workdir}
        return dict(recursive_merge(self._public_config(), self._uname, own, kwargs))

    def _public_config(self) -> dict[str, Any]:
        """The config as prompts and trajectory files may show it: credentials masked."""
        return dict(mask_secrets(self.config.model_dump(mode="json")))

    def serialize(self) -> dict[str, Any]:
        """The environment's part of a trajectory file."""
        return {
            "info": {
                "config": {
                    "environment": self._public_config(),
                    "environment_type": f"{type(self).__module__}.{type(self).__name__}",
                    "sandbox_id": self.sandbox.id,
                }
            }
        }

    def close(self) -> None:
        """Remove the sandbox (idempotent)."""
        self._closer()

    cleanup = close

    def __enter__(self) -> SandboxRuntimeEnvironment:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _output(result: ExecResult, limit: int) -> dict[str, Any]:
    if not result.timed_out:
        return {"output": result.stdout, "returncode": result.exit_code, "exception_info": ""}
    message = f"Command timed out after {limit} seconds: {shlex.quote(result.command[-200:])}"
    return {
        "output": result.stdout,
        "returncode": -1,
        "exception_info": f"An error occurred while executing the command: {message}",
        "extra": {"exception_type": "TimeoutError", "exception": message},
    }


def _check_submitted(output: Mapping[str, Any]) -> None:
    lines = str(output.get("output", "")).lstrip().splitlines(keepends=True)
    if not lines or lines[0].strip() != SUBMIT_MARKER or output.get("returncode") != 0:
        return
    from minisweagent.exceptions import Submitted

    submission = "".join(lines[1:])
    raise Submitted(
        {
            "role": "exit",
            "content": submission,
            "extra": {"exit_status": "Submitted", "submission": submission},
        }
    )


def grade_trajectory(
    path: str | os.PathLike[str],
    *,
    backend_options: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float = DEFAULT_TEST_TIMEOUT,
) -> GradeResult:
    """Grade the submission of a mini-swe-agent trajectory file by this library's grader.

    The trajectory (``mini -o run.traj.json``, or ``mini-extra``'s per-instance file) of a run
    in this environment names its task (``task_source``, ``task_id``) and backend in its
    config; the submission (the diff the agent printed after the marker) is applied in a fresh
    sandbox of that task and its tests decide, as the SWE-bench harness grades mini's
    predictions.  ``backend_options`` replace the recorded ones (credentials are masked in
    the file); ``env`` is added to the grading sandbox's.  A run that did not submit is a 0;
    tests that give no verdict are an ``error`` result (reward ``None``).
    """
    where = Path(path)
    try:
        data = json.loads(where.read_text(encoding="utf-8"))
        info = data["info"]
        recorded = info["config"]["environment"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"{where}: not a mini-swe-agent trajectory ({exc})") from exc
    if not recorded.get("task_source") or not recorded.get("task_id"):
        raise ConfigError(f"{where}: the environment names no task_source and task_id")
    task = load_task(str(recorded["task_source"]), str(recorded["task_id"]))
    options = recorded.get("backend_options") or {}
    config = task_config(
        task,
        backend=str(recorded.get("backend", "docker")),
        backend_options=dict(backend_options) if backend_options is not None else options,
        base_image=recorded.get("base_image"),
    )
    if env:
        config = config.model_copy(update={"env": {**config.env, **dict(env)}})
    if info.get("exit_status") != "Submitted":
        return GradeResult(0.0, f"the agent did not submit (exit status {info.get('exit_status')})")
    return grade_patch(task, config, str(info.get("submission") or ""), timeout=timeout)
