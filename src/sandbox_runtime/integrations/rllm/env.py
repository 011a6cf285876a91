"""``SWEEnv``: rLLM's SWE environment, on any backend, with R2E-Gym's tools and observations.

rLLM trains SWE agents (DeepSWE) through an environment with ``reset() -> (observation,
info)``, ``step(action) -> (observation, reward, done, info)``, ``compute_final_reward()``,
``close()`` and ``from_dict(extra_info)``.  rLLM's own ``SWEEnv`` reaches sandboxes through
R2E-Gym's ``RepoEnv``, which knows Docker and Kubernetes; this one opens the sandbox on
whichever backend is named (``+rllm.env.env_args.backend=ags`` in a Hydra override) and
otherwise behaves the same, so rollouts are the ones R2E-Gym and DeepSWE produce:

* ``reset`` opens a fresh sandbox, readies it as the task's benchmark does, and returns the
  issue as R2E-Gym returns it (the text inside ``[ISSUE]...[/ISSUE]``; rLLM's SWE agent puts
  its own prompt around it).
* ``step`` takes an action in R2E-Gym's ``<function=...>`` text (or a tool call), runs
  R2E-Gym's tools (``execute_bash``, ``file_editor`` with ``view``/``create``/``str_replace``/
  ``insert``/``undo_edit``, ``search``, ``finish``; SWE-agent's names too) and returns the
  output framed as R2E-Gym's ``Observation`` frames it (``Exit code: ...`` and ``Execution
  output of [...]:``).  An action that calls no tool gets an empty observation, as in rLLM.
  Commands starting with ``git``, ``ipython``, ``jupyter`` or ``nohup`` are refused, as
  R2E-Gym's ``execute_bash`` refuses them (``blocked_commands`` changes the list).
* ``compute_final_reward`` grades by the task's own tests.  By default (``grading="strict"``,
  :mod:`sandbox_runtime.swe.strict`) it grades in a fresh sandbox holding only the episode's
  change to non-test source, so a changed test, ``conftest.py``, test setting, startup hook
  or installed file earns nothing (:attr:`SWEEnv.last_grade` lists the dropped files);
  ``grading="benchmark"`` grades in the episode's sandbox or in a fresh one with the whole
  diff (``grade_in``: ``same``, ``fresh``, default the benchmark's own practice, see
  :mod:`sandbox_runtime.swe.isolation`).  It lists in
  :attr:`SWEEnv.last_tamper` what the episode changed that grading reads (the held-out
  tests, ``conftest.py``, pytest settings, installed packages; the reward is unchanged):
  1.0 or 0.0 when the tests decide, :class:`~sandbox_runtime.swe.grading.GradingError`
  when they could not (sandbox gone, backend error, harness timeout), never a 0 they did
  not give.  A sandbox that dies under ``step`` raises
  :class:`~sandbox_runtime.SandboxGoneError` the same way.
* ``from_dict`` takes a verl row's ``extra_info`` (as written by ``sandbox-runtime tasks
  rllm``, or any R2E-Gym / SWE-bench / SWE-smith / JSONL row) merged with rLLM's
  ``env_args``; the settings below are taken out, rLLM's other keys are ignored.

The tools: with ``tools="r2egym"`` (the default ``"auto"`` where R2E-Gym is importable),
R2E-Gym's own tool scripts, the ones rLLM gives ``RepoEnv``, are copied into the sandbox and
every call runs them as R2E-Gym's runtime does, so observations are R2E-Gym's byte for byte
(:class:`~sandbox_runtime.integrations.r2egym.ToolScripts` makes them run on images without
R2E-Gym's interpreter). With ``tools="builtin"`` (``"auto"`` without R2E-Gym) the tools are
this library's (:mod:`sandbox_runtime.swe.agents.tools`): the same commands, arguments,
framing and observations, byte for byte, without R2E-Gym installed. Installed scripts are
checked at ``reset`` (:func:`~sandbox_runtime.swe.agents.tool_check.require_tools`): where
they cannot run (``local`` with ``isolation="none"``) ``reset`` raises
:class:`~sandbox_runtime.ToolUnavailableError` saying what to change, and a step whose script
is gone raises it: never a ``command not found`` observation.

Lifetimes (docs/leases.md): the sandbox starts with a lifetime sized from the episode's budget
(``max_steps`` x ``step_timeout`` for commands and as much for model requests, then the reward
timeout and a grading headroom), the environment holds a lease on it while it has it (model
time between steps is bounded by nothing here), and ``compute_final_reward`` makes sure the
grading fits before it starts; ``max_lifetime`` is a hard cap.  Where a backend's cap is shorter
than an episode may need, one warning says so at the first environment.

When rLLM is installed, :class:`SWEEnv` subclasses its ``BaseEnv``; without it the class has
the same methods, so nothing here needs rLLM to run or to be tested.
"""

from __future__ import annotations

import json
import logging
import math
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from sandbox_runtime._core.runtime import SandboxRuntime
from sandbox_runtime._core.usage import SandboxUsage
from sandbox_runtime.errors import ConfigError, SandboxError
from sandbox_runtime.integrations.r2egym import (
    TOOL_PATH_PRELUDE,
    ToolScripts,
    run_command,
    strip_colours,
    timeout_message,
    tool_files,
)
from sandbox_runtime.swe import lifetimes, tamper
from sandbox_runtime.swe.agents.r2e_protocol import (
    BLOCKED_COMMANDS,
    FINISHED,
    NO_FUNCTION_CALL,
    bash_command,
    blocked_command,
    blocked_message,
    frame,
    frame_script_output,
    parse_action,
    tool_name,
)
from sandbox_runtime.swe.agents.tool_check import NOT_FOUND_EXIT_CODES, require_tools
from sandbox_runtime.swe.agents.tools import Observation, ToolBox, ToolCall
from sandbox_runtime.swe.benchmark_checks import grade_benchmark, no_verdict_after_tampering
from sandbox_runtime.swe.bigfields import issue_excerpt
from sandbox_runtime.swe.capture import ChangeSet, display_patch, read_change
from sandbox_runtime.swe.grading import DEFAULT_TEST_TIMEOUT, GradeResult, GradingError
from sandbox_runtime.swe.history import forget_history
from sandbox_runtime.swe.isolation import (
    GradeIn,
    grade_fresh,
    grade_fresh_changes,
    resolve_grade_in,
)
from sandbox_runtime.swe.prefetch import TaskPrefetcher
from sandbox_runtime.swe.prepare import prepare
from sandbox_runtime.swe.prepared import PreparedStates
from sandbox_runtime.swe.rows import parse_row
from sandbox_runtime.swe.runner import RunOptions, task_lifetime, task_sandbox_config
from sandbox_runtime.swe.strict import GradingMode, outside_changes, resolve_grading
from sandbox_runtime.swe.task import Task
from sandbox_runtime.swe.verdict import integrity_counts

if TYPE_CHECKING:
    _EnvBase = object
else:
    try:  # rLLM's base class where rLLM is installed, so isinstance checks there pass
        from rllm.environments.base.base_env import BaseEnv as _EnvBase
    except ImportError:
        _EnvBase = object

__all__ = ["SETTINGS", "SWEEnv"]

logger = logging.getLogger("sandbox_runtime.rllm")

#: ``from_dict`` keys that configure the environment rather than describe the task.
SETTINGS = (
    "backend",
    "backend_options",
    "step_timeout",
    "reward_timeout",
    "base_image",
    "max_output_chars",
    "blocked_commands",
    "tools",
    "grade_in",
    "grading",
    "max_steps",
    "max_lifetime",
)
_cap_warnings: set[str] = set()
_cap_warnings_lock = threading.Lock()


def _warn_once_about_caps(task: Task, options: RunOptions) -> None:
    """One warning per process when the backend's cap is shorter than an episode may need."""
    try:
        warning = lifetimes.cap_warning(
            task_sandbox_config(task, options), task_lifetime(task, options)
        )
    except SandboxError:
        return  # the configuration's own error comes at reset
    if warning is None:
        return
    with _cap_warnings_lock:
        if warning in _cap_warnings:
            return
        _cap_warnings.add(warning)
    logger.warning("SWEEnv: %s", warning)


#: rLLM's own SWEEnv settings, accepted in ``env_args`` and not passed on as task fields
#: (``delete_image`` becomes the docker backend's option of that name).
_RLLM_SETTINGS = ("verbose", "scaffold", "delete_image", "dataset", "idx")


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(key): _plain(item) for key, item in value.items()}
    if isinstance(value, Sequence) and not isinstance(value, str):
        return [_plain(item) for item in value]
    return value


class SWEEnv(_EnvBase):
    """One SWE task as an RL environment: a fresh sandbox per episode, tools as actions."""

    def __init__(
        self,
        entry: Mapping[str, Any] | Task,
        *,
        backend: str = "local",
        backend_options: Mapping[str, Any] | None = None,
        step_timeout: float = 90.0,
        reward_timeout: float = DEFAULT_TEST_TIMEOUT,
        base_image: str | None = None,
        max_output_chars: int = 16000,
        blocked_commands: Sequence[str] = BLOCKED_COMMANDS,
        tools: Literal["auto", "r2egym", "builtin"] = "auto",
        grade_in: str | None = None,
        grading: str = GradingMode.STRICT.value,
        max_steps: int = 50,
        max_lifetime: float | None = None,
        shared: PreparedStates | None = None,
        prefetcher: TaskPrefetcher | None = None,
    ) -> None:
        if shared is not None and prefetcher is not None:
            raise ConfigError("SWEEnv: shared setups and a prefetcher both open the sandbox")
        self.task = entry if isinstance(entry, Task) else parse_row(dict(entry), index="entry")
        self.options = RunOptions(
            backend=backend,
            step_timeout=step_timeout,
            test_timeout=reward_timeout,
            base_image=base_image,
            backend_options=dict(backend_options or {}),
            max_steps=max_steps,
            max_lifetime=max_lifetime,
        )
        _warn_once_about_caps(self.task, self.options)
        self.max_output_chars = max_output_chars
        self.blocked_commands = tuple(blocked_commands)
        scripts = tool_files() if tools in ("auto", "r2egym") else []
        if tools == "r2egym" and not scripts:
            raise ConfigError("SWEEnv(tools='r2egym') needs R2E-Gym installed (its tool scripts)")
        self.tool_scripts: list[Path] = scripts
        self._script_names: set[str] = set()
        self.grading = resolve_grading(grading, grade_in)
        strict = self.grading is GradingMode.STRICT
        self.grade_in = GradeIn.FRESH if strict else resolve_grade_in(self.task, grade_in)
        self.last_tamper: list[tamper.TamperFlag] = []
        self.last_changes: ChangeSet | None = None
        """The change of the last graded episode, read from outside its sandbox."""
        self.last_patch = ""
        """The readable patch fresh grading applied (rendered by trusted code)."""
        self._grading_usage = SandboxUsage()
        self._grading_seconds = 0.0
        self._closed_usage = SandboxUsage()
        self._baseline: tamper.Baseline | None = None
        self.sandbox: SandboxRuntime | None = None
        self.tools: ToolBox | None = None
        self.total_steps = 0
        self.last_grade: GradeResult | None = None
        self._idx: Any = None
        self._lock = threading.Lock()
        self.shared = shared
        """Prepared states shared with the other rollouts of the task's group, if any."""
        self.prefetcher = prefetcher
        """Where the task's sandbox comes from already started, when the trainer feeds its
        schedule to one (docs/prefetch.md; its configurations must be the ones this
        environment opens, ``task_sandbox_config(task, env.options)``); not with ``shared``."""

    # rLLM's batch index, kept here too so the class behaves the same without rLLM.
    @property
    def idx(self) -> Any:
        return self._idx

    @idx.setter
    def idx(self, value: Any) -> None:
        self._idx = value

    def reset(self) -> tuple[str, dict[str, Any]]:
        """Open a fresh sandbox for the task; returns the issue and the task's identity."""
        with self._lock:
            self._close_sandbox()
            sandbox = self._open_prepared()
            try:
                lifetimes.hold_lease(sandbox, self._grading_seconds_needed())
                sandbox.base_commit(refresh=True)
                forget_history(sandbox)  # no later commit holds the fix (swe.history)
                self._install_scripts(sandbox)
                self._baseline = tamper.baseline_or_none(sandbox, self.task)
                # Refuses a sandbox whose commands do not see its paths, before any step.
                tools = ToolBox(
                    sandbox,
                    timeout=self.options.step_timeout,
                    max_output_chars=self.max_output_chars,
                )
            except BaseException:
                sandbox.close()
                raise
            self.sandbox = sandbox
            self.tools = tools
            self.total_steps = 0
            self.last_grade = None
            self.last_tamper = []
            self._grading_usage, self._grading_seconds = SandboxUsage(), 0.0
        info: dict[str, Any] = {
            "task_id": self.task.task_id,
            "sandbox_id": sandbox.id,
            "grade_in": self.grade_in.value,
            "accounting": self.accounting(),
        }
        issue, cut = issue_excerpt(self.task.problem_statement)
        if cut is not None:  # the model is told in the text; the trainer's log hears it here
            info["notes"] = [f"the issue given to the model was cut: {cut.note()}"]
        return issue, info

    def _open_prepared(self) -> SandboxRuntime:
        """A started, prepared sandbox: a copy of the group's shared state, or a fresh setup."""
        if self.shared is not None:
            return self.shared.open(self.task, self.options)
        config = task_sandbox_config(self.task, self.options)
        if self.prefetcher is not None:
            sandbox = self.prefetcher.take(self.task, config)
        else:
            sandbox = SandboxRuntime(config)
        try:
            sandbox.start()
            prepare(self.task, sandbox)
        except BaseException:
            sandbox.close()
            raise
        return sandbox

    def step(
        self, action: str | ToolCall | Mapping[str, Any]
    ) -> tuple[str, float, bool, dict[str, Any]]:
        """Run one action; the reward of a step is 0 and ``done`` is set by finish/submit."""
        tools = self._require_tools()
        call = parse_action(action, raw=bool(self._script_names))
        self.total_steps += 1
        if call is None:
            # R2E-Gym's Observation of an empty action: its reminder to call a function.
            return NO_FUNCTION_CALL, 0.0, False, {"tool": None, "accounting": self.accounting()}
        if self._script_names:
            return self._step_with_scripts(call)
        name = tool_name(call.name)
        refused = blocked_command(str(call.arguments.get("command", "")), self.blocked_commands)
        if name == "bash" and refused:
            observation = Observation(blocked_message(refused), exit_code=1, error=True)
        else:
            observation = tools.run(ToolCall(name, call.arguments, call.id))
        info = {
            "tool": name,
            "exit_code": observation.exit_code,
            "error": observation.error,
            "duration": observation.duration,
            "accounting": self.accounting(),
        }
        text = frame(call.name, observation, timeout=self.options.step_timeout)
        return text, 0.0, observation.done, info

    def _install_scripts(self, sandbox: SandboxRuntime) -> None:
        """R2E-Gym's tool scripts into ``/usr/local/bin``, named as RepoEnv names them.

        Checked once installed: a script the sandbox's commands cannot run fails the reset
        with :class:`~sandbox_runtime.ToolUnavailableError` (``local`` with
        ``isolation="none"``: use ``isolation="namespace"``), never a step's observation.
        """
        self._script_names = (
            ToolScripts(sandbox).install_all(self.tool_scripts) if self.tool_scripts else set()
        )

    def _step_with_scripts(self, call: ToolCall) -> tuple[str, float, bool, dict[str, Any]]:
        """One call run as R2E-Gym's RepoEnv runs it: its script, its exit status."""
        sandbox = self._require_sandbox()
        info: dict[str, Any] = {"tool": call.name}
        if tool_name(call.name) == "submit":
            return FINISHED, 0.0, True, info | {"accounting": self.accounting()}
        if call.name not in self._script_names:
            # RepoEnv refuses a tool it did not install and shows the call with no output.
            return frame_script_output(call.name, "", "-1"), 0.0, False, info | {"error": True}
        timeout = self.options.step_timeout
        result, status = run_command(sandbox, bash_command(call), timeout=timeout)
        if result.exit_code in NOT_FOUND_EXIT_CODES:
            # The script itself gone (not found) is a fault; a command's own 127 is output.
            require_tools(sandbox, [call.name], prelude=TOOL_PATH_PRELUDE)
        if status == "-1":
            output = timeout_message(timeout)
        else:
            output = strip_colours(result.output) if status == "0" else result.output
        info |= {
            "exit_code": result.exit_code,
            "duration": result.duration,
            "accounting": self.accounting(),
        }
        return frame_script_output(call.name, output, status), 0.0, False, info

    def compute_final_reward(self) -> float:
        """Grade the episode by the task's own tests (1.0 or 0.0), where ``grade_in`` says.

        Raises :class:`~sandbox_runtime.swe.grading.GradingError` when the tests gave no
        verdict (sandbox gone, backend error, harness timeout, a fresh sandbox that would not
        start): never a 0 they did not give.
        """
        sandbox = self._require_sandbox()
        try:
            # Read from outside the agent's reach (the engine, the host, the file plane).
            changes, found, problem = read_change(sandbox, self._baseline)
            self.last_changes = changes
            patch = display_patch(sandbox, changes) if changes is None else ""
            if self.grade_in is not GradeIn.FRESH:
                # The sandbox holding the ungraded patch must outlive its grading.
                lifetimes.ensure_remaining(sandbox, self._grading_seconds_needed())
        except SandboxError as exc:  # the episode's sandbox is gone: nothing can be graded
            self.last_grade = GradeResult(
                None,
                f"infrastructure error: {type(exc).__name__}: {exc}",
                grade_in=self.grade_in.value,
            )
            raise GradingError(self.last_grade) from exc
        self.last_tamper = tamper.audit(self.task, sandbox.workdir, self._baseline, found, problem)
        timeout = self.options.test_timeout
        began = time.monotonic()
        if self.grade_in is GradeIn.FRESH:
            self.last_grade, used = self._grade_fresh(patch, timeout, changes)
            if self.grading is GradingMode.STRICT:
                outside = outside_changes(self.last_tamper)
                self.last_grade.dropped += [change.to_dict() for change in outside]
            self._grading_usage = self._grading_usage + used
        else:
            written = changes.written if changes else []
            graded = grade_benchmark(self.task, sandbox, written, timeout=timeout)
            self.last_grade = no_verdict_after_tampering(graded, self.last_tamper)
        self._grading_seconds += time.monotonic() - began
        self.last_grade.grade_in = self.grade_in.value
        return self.last_grade.reward_or_raise()

    def _grade_fresh(
        self, patch: str, timeout: float, changes: ChangeSet | None = None
    ) -> tuple[GradeResult, SandboxUsage]:
        """Grade the change fresh: in a copy of the group's prepared state, or a new setup.

        ``changes`` (read from outside the agent's sandbox) is what is applied; ``patch``
        only when no change set could be read.  Returns the result (an error result when no
        grading sandbox could start: never a 0) and what the grading sandbox used.
        """
        strict = self.grading is GradingMode.STRICT
        prepared = self.shared is not None
        if self.shared is None:
            fresh = SandboxRuntime(task_sandbox_config(self.task, self.options))
        else:
            try:
                fresh = self.shared.open(self.task, self.options)
            except SandboxError as exc:
                failed = GradeResult(None, f"infrastructure error: grading copy: {exc}")
                return failed, SandboxUsage()
        if changes is not None:
            graded, shown = grade_fresh_changes(
                self.task, fresh, changes, timeout=timeout, strict=strict, prepared=prepared
            )
            self.last_patch = shown or ""
            return graded, fresh.usage
        graded = grade_fresh(
            self.task, fresh, patch, timeout=timeout, strict=strict, prepared=prepared
        )
        self.last_patch = patch
        return graded, fresh.usage

    def integrity(self) -> dict[str, int]:
        """The last graded episode's reward-integrity counts (0/1 each; ``dropped``: files).

        ``flagged``, ``dropped``, ``refused``, ``canary_tripped``
        (:func:`~sandbox_runtime.swe.verdict.integrity_counts`): summed over a batch, they show
        when a policy starts probing the grader.  All zero before the first grading.
        """
        return integrity_counts(self.last_grade, self.last_tamper)

    def accounting(self) -> dict[str, Any]:
        """What the episode used so far: its sandbox, a fresh grading sandbox, grading time.

        Counted by the runtime as calls pass (:mod:`sandbox_runtime._core.usage`): no engine call.
        """
        episode = self.sandbox.usage if self.sandbox is not None else self._closed_usage
        return {
            **(episode + self._grading_usage).to_dict(),
            "grading_seconds": round(self._grading_seconds, 3),
        }

    def patch(self) -> str:
        """The episode's changes to the repository, as a diff against the task's base.

        ``git diff`` in the episode's sandbox, for display: the agent may have replaced
        ``git`` there.  What grading applies is :meth:`changes`.
        """
        return self._require_sandbox().diff()

    def changes(self) -> ChangeSet | None:
        """The episode's change, read from outside its sandbox (``None``: it could not be).

        The backend's engine, host or file plane against the mark taken at :meth:`reset`
        (:mod:`sandbox_runtime.swe.capture`); no program in the sandbox is asked.
        """
        sandbox = self._require_sandbox()
        changes, found, problem = read_change(sandbox, self._baseline)
        if changes is None:
            logger.warning("the change of %s could not be read: %s", self.task.task_id, problem)
        # The same reading's tamper flags: a flow that grades elsewhere hands them on.
        self.last_tamper = tamper.audit(self.task, sandbox.workdir, self._baseline, found, problem)
        return changes

    def close(self) -> None:
        """Remove the sandbox; harmless to call twice."""
        with self._lock:
            self._close_sandbox()

    @staticmethod
    def from_dict(extra_info: Mapping[str, Any] | str) -> SWEEnv:
        """From a verl row's ``extra_info`` (merged with rLLM's ``env_args``)."""
        info = json.loads(extra_info) if isinstance(extra_info, str) else dict(extra_info)
        # Hydra hands env_args over as OmegaConf containers: plain values from here on.
        settings: dict[str, Any] = {}
        for key in SETTINGS:
            if key not in info:
                continue
            # ``max_steps`` is a task field as well (a row's own budget): it stays in the row.
            value = _plain(info[key] if key == "max_steps" else info.pop(key))
            if not _missing(value):
                settings[key] = value
        if _plain(info.get("delete_image")) is True and settings.get("backend") == "docker":
            # rLLM's delete_image: on docker, the image goes when the sandbox closes (only
            # an image this library pulled and no container uses: docs/images.md).
            settings["backend_options"] = {
                "delete_image": True,
                **settings.get("backend_options", {}),
            }
        for key in _RLLM_SETTINGS:
            info.pop(key, None)
        return SWEEnv(info, **settings)

    @staticmethod
    def is_multithread_safe() -> bool:
        """Each env owns its sandbox and the runtime is thread-safe: rLLM may use threads."""
        return True

    def __enter__(self) -> SWEEnv:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = self.sandbox.id if self.sandbox is not None else "no sandbox"
        return f"SWEEnv(task={self.task.task_id!r}, backend={self.options.backend!r}, {state})"

    def _grading_seconds_needed(self) -> float:
        return lifetimes.grading_seconds(self.options.test_timeout)

    def _require_sandbox(self) -> SandboxRuntime:
        if self.sandbox is None:
            raise RuntimeError("call reset() first: the environment has no sandbox yet")
        return self.sandbox

    def _require_tools(self) -> ToolBox:
        self._require_sandbox()
        assert self.tools is not None
        return self.tools

    def _close_sandbox(self) -> None:
        if self.sandbox is not None:
            sandbox, self.sandbox, self.tools = self.sandbox, None, None
            try:
                sandbox.close()
            finally:
                self._closed_usage = sandbox.usage


def _missing(value: Any) -> bool:
    """A NaN, as pandas gives a column a row lacks (rows of mixed formats in one parquet file)."""
    return isinstance(value, float) and math.isnan(value)
