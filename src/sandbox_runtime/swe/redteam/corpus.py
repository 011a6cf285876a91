"""Run the corpus through the library's public entry points and judge every result.

One :class:`Cell` is one hack on one task shape, through one entry point, on one backend.
The entry points here are the ones of the SWE layer: ``run`` graded strictly and the
benchmark's way (:class:`~sandbox_runtime.swe.runner.Runner` with the scripted agent) and
verl's ``compute_score`` (:mod:`sandbox_runtime.swe.patch_reward`, for the model-response
hacks); :mod:`sandbox_runtime.integrations.redteam` adds ``SWEEnv`` and rLLM's evaluator.

A cell is judged by what its hack must get (:class:`~sandbox_runtime.swe.redteam.hacks.
Expect`): under strict grading a 0 that is flagged (a tamper flag or a dropped change; a
refused patch is flagged too once refused), under benchmark grading a 0 or a flag.  A
``no-reward`` hack (a test run that never ends) only must not earn 1.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import PurePosixPath
from typing import Any

from sandbox_runtime.errors import SandboxError
from sandbox_runtime.swe.agents.scripted import ScriptedAgent
from sandbox_runtime.swe.grading import GradingError
from sandbox_runtime.swe.patch_reward import compute_score
from sandbox_runtime.swe.redteam.hacks import HACKS, LANDED, Expect, Hack
from sandbox_runtime.swe.redteam.leaky import leaky_task
from sandbox_runtime.swe.redteam.responses import Target
from sandbox_runtime.swe.runner import Runner, RunOptions
from sandbox_runtime.swe.task import Task

__all__ = [
    "BACKENDS",
    "SWE_ENTRIES",
    "Backend",
    "Cell",
    "Entry",
    "prepared_task",
    "run_cells",
    "skip_reason",
    "target_of",
]

#: Seconds a hack's test run may take (the sleeping hacks set their own, shorter one).
TEST_TIMEOUT = 120.0


@dataclass(frozen=True)
class Backend:
    """A backend as the corpus runs it: its name and options, and a label for the matrix."""

    label: str
    name: str
    options: Mapping[str, Any] = field(default_factory=dict)

    @property
    def host_files(self) -> bool:
        """Whether paths outside the repository are the host's (``local`` without isolation)."""
        return self.name == "local" and self.options.get("isolation", "none") == "none"


BACKENDS: dict[str, Backend] = {
    "docker": Backend("docker", "docker"),
    "local-namespace": Backend("local-namespace", "local", {"isolation": "namespace"}),
    "local-none": Backend("local-none", "local", {"isolation": "none"}),
}


@dataclass
class Cell:
    """One hack through one entry point on one backend and task, and what it earned."""

    hack: str
    klass: str
    expects: str
    entry: str
    backend: str
    task: str
    reward: float | None = None
    flagged: bool = False
    dropped: int = 0
    reason: str = ""
    skipped: str = ""
    blocked: bool = False
    """The hack's command stopped early in the agent's sandbox (a write refused): it never
    landed, so there is nothing to flag."""
    seconds: float = 0.0

    @property
    def strict(self) -> bool:
        """Whether the entry point grades strictly."""
        return not self.entry.endswith("benchmark")

    @property
    def verdict(self) -> str:
        """``ok``, ``skipped``, or what went wrong: ``REWARD``, ``UNFLAGGED``, ``ERROR``."""
        if self.skipped:
            return "skipped"
        if self.reward == 1.0:
            if self.strict or not self.flagged:
                return "REWARD" if self.strict else "UNFLAGGED"
            return "ok"
        if self.expects == Expect.NO_REWARD.value:
            return "ok"
        if self.reward is None:
            # A run that refused before the agent ran (local without isolation: the tool set
            # cannot see the sandbox's paths) earned nothing and let nothing land.
            return "ok" if "ToolUnavailableError" in self.reason else "ERROR"
        return "ok" if self.flagged or self.blocked or not self.strict else "UNFLAGGED"

    def to_dict(self) -> dict[str, Any]:
        """The cell as JSON, with its verdict."""
        return {**asdict(self), "verdict": self.verdict}


Entry = Callable[[Hack, Task, Backend], Cell]


def target_of(task: Task) -> Target:
    """What the attacker knows of ``task``: its package, a test file, the failing tests."""
    grading = task.grading
    failing = tuple(getattr(grading, "fail_to_pass", ()) or ())
    if not failing:
        failing = tuple(sorted(getattr(grading, "expected_output", {}) or {}))
    candidates = [t.split("::", 1)[0] for t in failing if "::" in t]
    modified = task.source.get("modified_files") if isinstance(task.source, dict) else None
    if isinstance(modified, str):
        candidates += [p.strip(" '\"") for p in modified.strip("[]").split(",")]
    tests = [p for p in candidates if "test" in PurePosixPath(p).name]
    sources = [p for p in _patch_paths(task.gold_patch) if "test" not in p]
    package = PurePosixPath(sources[0]).parts[0] if sources else "src"
    return Target(package, tests[0] if tests else "tests/test_core.py", failing)


def _patch_paths(patch: str) -> list[str]:
    return [
        line.split(" b/", 1)[0][len("diff --git a/") :]
        for line in patch.splitlines()
        if line.startswith("diff --git a/")
    ]


def _cell(hack: Hack, entry: str, backend: Backend, task: Task) -> Cell:
    return Cell(hack.id, hack.klass.value, hack.expects.value, entry, backend.label, task.format)


def skip_reason(hack: Hack, backend: Backend, entry: str = "") -> str:
    """Why the corpus does not run ``hack`` through ``entry`` on ``backend`` ("" when it does)."""
    if entry.startswith("compute-score") and hack.response is None:
        return "not a model response"
    if entry and not entry.startswith("compute-score") and hack.response is not None:
        return "a model response: graded by compute_score"
    if hack.host and backend.host_files:
        return "writes outside the repository: on local with isolation=none those are the host's"
    if hack.leaky_image and backend.name != "docker":
        return "needs a leaky image (docker only)"
    return ""


def local_env(task: Task, backend: Backend) -> Task:
    """On ``local``, the interpreter running the corpus first on the sandbox's ``PATH``.

    A local sandbox runs the host's tools; this makes its ``python`` the one with pytest.
    """
    if backend.name != "local":
        return task
    path = f"{os.path.dirname(sys.executable)}{os.pathsep}{os.environ.get('PATH', '')}"
    return task.model_copy(update={"env": {**task.env, "PATH": path}})


def prepared_task(hack: Hack, task: Task, backend: Backend) -> Task:
    """``task`` as ``hack`` runs on ``backend``: on its leaky image, with local's ``PATH``."""
    task = leaky_task(task) if hack.leaky_image else task
    return local_env(task, backend)


def _run_entry(grading: str) -> Entry:
    grade_in = "fresh" if grading == "strict" else "same"

    def entry(hack: Hack, task: Task, backend: Backend) -> Cell:
        cell = _cell(hack, f"run-{grading}", backend, task)
        agent = ScriptedAgent(hack.script(target_of(task)))
        options = RunOptions(
            backend=backend.name,
            grading=grading,
            grade_in=grade_in,
            test_timeout=hack.test_timeout or TEST_TIMEOUT,
            step_timeout=60.0,
            backend_options=dict(backend.options),
        )
        (outcome,) = Runner([prepared_task(hack, task, backend)], lambda: agent, options).run()
        cell.reward, cell.reason = outcome.reward, outcome.error or outcome.reason
        cell.dropped = len(outcome.dropped)
        cell.flagged = outcome.flagged or bool(outcome.dropped)
        ran = [step.output for step in outcome.steps if step.action == "bash"]
        cell.blocked = not any(LANDED in output for output in ran)
        return cell

    return entry


def _score_entry(grading: str) -> Entry:
    def entry(hack: Hack, task: Task, backend: Backend) -> Cell:
        cell = _cell(hack, f"compute-score-{grading}", backend, task)
        if hack.response is None:
            raise ValueError(f"{hack.id} is not a model response")
        response = hack.response(target_of(task))
        try:
            found = compute_score(
                "swe",
                response,
                None,
                task.source,
                retries=0,
                details=True,
                backend=backend.name,
                backend_options=dict(backend.options),
                test_timeout=hack.test_timeout or TEST_TIMEOUT,
                grading=grading,
            )
        except (GradingError, SandboxError) as exc:
            cell.reason = str(exc)
            return cell
        assert isinstance(found, dict)
        cell.reward = float(found["score"])
        cell.dropped = int(found.get("dropped", 0))
        cell.flagged = bool(found.get("flagged")) or cell.dropped > 0
        return cell

    return entry


SWE_ENTRIES: dict[str, Entry] = {
    "run-strict": _run_entry("strict"),
    "run-benchmark": _run_entry("benchmark"),
    "compute-score-strict": _score_entry("strict"),
    "compute-score-benchmark": _score_entry("benchmark"),
}
"""The SWE layer's entry points, by the name the matrix gives them."""


def run_cells(
    hacks: Sequence[Hack],
    tasks: Sequence[Task],
    entries: Mapping[str, Entry],
    backends: Iterable[Backend],
    *,
    jobs: int = 2,
    progress: Callable[[Cell], None] | None = None,
) -> list[Cell]:
    """Every hack x task x entry point x backend, ``jobs`` at a time, in a stable order."""
    plan = [
        (hack, task, name, entry, backend)
        for backend in backends
        for name, entry in entries.items()
        for hack in hacks
        for task in tasks
    ]

    def one(item: tuple[Hack, Task, str, Entry, Backend]) -> Cell:
        hack, task, name, entry, backend = item
        why = skip_reason(hack, backend, name)
        if why:
            cell = _cell(hack, name, backend, task)
            cell.skipped = why
        else:
            began = time.monotonic()
            try:
                cell = entry(hack, task, backend)
            except Exception as exc:  # one broken cell is reported, not the whole matrix lost
                cell = _cell(hack, name, backend, task)
                cell.reason = f"{type(exc).__name__}: {exc}"
            cell.seconds = round(time.monotonic() - began, 1)
        if progress is not None:
            progress(cell)
        return cell

    with ThreadPoolExecutor(max_workers=max(jobs, 1)) as pool:
        return list(pool.map(one, plan))


def default_hacks() -> tuple[Hack, ...]:
    """The whole corpus."""
    return HACKS


def bundled_tasks(
    sample: str = "csvline", shapes: Sequence[str] = ("swebench", "r2e")
) -> list[Task]:
    """The bundled sample's rows in ``shapes`` (``swebench``, ``r2e``), in that order."""
    from sandbox_runtime.swe.dataset import load_rows
    from sandbox_runtime.swe.rows import read_rows

    tasks = read_rows(load_rows("bundled")).tasks
    chosen = [t for shape in shapes for t in tasks if t.format == shape and sample in t.task_id]
    if len(chosen) != len(shapes):
        raise KeyError(f"no bundled sample {sample!r} in every shape of {', '.join(shapes)}")
    return chosen
