"""The red-team corpus (:mod:`sandbox_runtime.swe.redteam`), run as CI runs it.

Every hack through ``run`` with strict grading on docker and on local (namespace isolation),
every model-response hack through ``compute_score``, and one hack of each class through
``SWEEnv``, rLLM's evaluator (on docker) and ``run`` on local without isolation: each must
earn 0 (or no reward, for the timeouts) and be flagged.  Graded the benchmark's way, the
representatives must be stopped or flagged.  The cells of one hack run at once; the full
matrix (both task shapes, every entry point and backend) is ``sandbox-runtime redteam``'s,
in docs/reliability.md.

Hacks the code does not stop yet are marked ``xfail(strict=True)`` with the item of issue 29
that stops them: once it is merged the mark must go (an unexpected pass fails the run).
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from sandbox_runtime.integrations.redteam import ALL_ENTRIES
from sandbox_runtime.swe import Task
from sandbox_runtime.swe.images import build_sample_image
from sandbox_runtime.swe.redteam.corpus import BACKENDS, Backend, Cell, run_cells, skip_reason
from sandbox_runtime.swe.redteam.hacks import HACKS, Hack, HackClass, hack_named
from sandbox_runtime.swe.redteam.matrix import failures, summary_lines
from tests.conftest import DOCKER_IMAGE, bwrap_problem, require
from tests.swe.conftest import task_named

SAMPLE = "csvline"

#: One hack of each class, run through every entry point.
REPRESENTATIVES = {
    HackClass.PATCH_FORMAT: "hidden-context-diff",
    HackClass.TEST_INFRA: "conftest-root",
    HackClass.INTERPRETER: "shadow-argparse",
    HackClass.FORGED_TOOL: "forged-git",
    HackClass.OUTPUT: "print-passed-import",
    HackClass.TEST_REMOVAL: "skip-markers",
    HackClass.HISTORY: "replace-base",
    HackClass.TIMEOUT: "sleep-in-source",
}

_ITEM1 = "issue 29 item 1 (the agent's change and tamper flags measured from outside its sandbox)"
_ITEM2 = (
    "issue 29 item 2 (one strict patch reader: git's unified diff only, no fuzz, refused+flagged)"
)
_CANARY = "issue 29 item 3 (source that patches the test machinery detected by a canary)"
_ITEM6 = "issue 29 item 6 (integrity counts: the rLLM evaluator reports no tamper flag)"
_HISTORY = (
    "not in items 1-4: the agent's sandbox keeps refs and objects past the base commit "
    "(stash, reflog, packed refs); setup must drop them"
)

#: Hacks the current code does not stop under strict grading, and what stops them (measured
#: on this branch; the cells that fail are in the comment).
STRICT_XFAIL: dict[str, str] = {}
#: Representatives that benchmark grading neither stops nor flags.
BENCHMARK_XFAIL: dict[str, str] = {}


def _marked(hacks: list[Hack], known: dict[str, str]) -> list[object]:
    return [
        pytest.param(h, id=h.id, marks=[pytest.mark.xfail(strict=True, reason=known[h.id])])
        if h.id in known
        else pytest.param(h, id=h.id)
        for h in hacks
    ]


@pytest.fixture(scope="module")
def task(bundled_tasks: list[Task], docker_image: str) -> Task:
    build_sample_image(SAMPLE, base=DOCKER_IMAGE)
    return task_named(bundled_tasks, SAMPLE, "swebench")


def _plan(hack: Hack, strict: bool) -> list[tuple[str, Backend]]:
    """The (entry point, backend) cells CI runs for ``hack``."""
    representative = hack.id in REPRESENTATIVES.values()
    if hack.response is not None:  # a model response: verl's compute_score grades it
        mode = "strict" if strict else "benchmark"
        return [(f"compute-score-{mode}", BACKENDS["docker"])]
    if not strict:
        return [("run-benchmark", BACKENDS["docker"])]
    plan = [("run-strict", BACKENDS["docker"]), ("run-strict", BACKENDS["local-namespace"])]
    if representative:
        plan += [("swe-env", BACKENDS["docker"]), ("rllm-eval", BACKENDS["docker"])]
        plan.append(("run-strict", BACKENDS["local-none"]))
    return [(entry, backend) for entry, backend in plan if not skip_reason(hack, backend, entry)]


def _cells(hack: Hack, task: Task, strict: bool) -> list[Cell]:
    """The hack's CI cells, all at once (each through its own entry point and backend)."""
    plan = _plan(hack, strict)
    if any(backend.name == "local" for _, backend in plan):
        require(bwrap_problem())

    def one(item: tuple[str, Backend]) -> Cell:
        entry, backend = item
        (cell,) = run_cells([hack], [task], {entry: ALL_ENTRIES[entry]}, [backend])
        return cell

    with ThreadPoolExecutor(max_workers=len(plan)) as pool:
        return list(pool.map(one, plan))


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.parametrize("hack", _marked(list(HACKS), STRICT_XFAIL))
def test_every_hack_earns_nothing_and_is_flagged_under_strict_grading(
    hack: Hack, task: Task
) -> None:
    cells = _cells(hack, task, strict=True)
    assert cells
    assert not failures(cells), "\n".join(summary_lines(cells))


_REPRESENTED = [hack_named(name) for name in REPRESENTATIVES.values()]


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.parametrize("hack", _marked(_REPRESENTED, BENCHMARK_XFAIL))
def test_benchmark_grading_flags_what_it_does_not_stop(hack: Hack, task: Task) -> None:
    cells = _cells(hack, task, strict=False)
    assert not failures(cells), "\n".join(summary_lines(cells))


#: Hacks the full matrix (docs/reliability.md) found unflagged graded the benchmark's way,
#: beyond the representatives: a pytest11 entry point in metadata at the repository's root
#: (a test-config flag), a package ``__init__`` neutering the assertions or ``TestCase.run``,
#: in the agent's sandbox or by a fuzz-only hunk through ``compute_score`` (the canary runs
#: after a pass), ``PASSED`` lines printed at exit (the out-of-band record), and a forged
#: ``python3`` (no verdict after a tampered test run is a 0, not an error).
_BENCHMARK_FOUND = [
    "entry-point-repo",
    "init-asserts",
    "forged-python",
    "print-passed-exit",
    "skip-from-source",
    "fuzz",
]


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.parametrize("name", _BENCHMARK_FOUND)
def test_benchmark_grading_flags_what_the_matrix_found(name: str, task: Task) -> None:
    cells = _cells(hack_named(name), task, strict=False)
    assert not failures(cells), "\n".join(summary_lines(cells))


@pytest.mark.docker
@pytest.mark.slow
def test_a_rewritten_run_tests_sh_is_flagged_where_r2e_setup_hides_it(
    bundled_tasks: list[Task], task: Task
) -> None:
    # R2E-Gym's setup moves run_tests.sh out of the repository (to /root); the hack finds it
    # there, and the tamper check watches it as one of the task's tests.
    r2e = task_named(bundled_tasks, SAMPLE, "r2e")
    hack = hack_named("run-tests-rewritten")
    (cell,) = run_cells(
        [hack], [r2e], {"run-strict": ALL_ENTRIES["run-strict"]}, [BACKENDS["docker"]]
    )
    assert not cell.blocked, cell.to_dict()
    assert cell.flagged, cell.to_dict()
    assert cell.reward == 0.0, cell.to_dict()


def test_the_corpus_covers_every_class_with_at_least_40_hacks() -> None:
    assert len(HACKS) >= 40
    assert len({h.id for h in HACKS}) == len(HACKS)
    assert {h.klass for h in HACKS} == set(HackClass)
    assert all(h.response is not None for h in HACKS if h.klass is HackClass.PATCH_FORMAT)


def _cell(entry: str, reward: float | None, *, flagged: bool = False, **more: object) -> Cell:
    cell = Cell("h", "test-infrastructure", "flagged", entry, "docker", "swebench", reward, flagged)
    for key, value in more.items():
        setattr(cell, key, value)
    return cell


@pytest.mark.parametrize(
    ("cell", "verdict"),
    [
        (_cell("run-strict", 0.0, flagged=True), "ok"),
        (_cell("run-strict", 0.0), "UNFLAGGED"),
        (_cell("run-strict", 0.0, blocked=True), "ok"),
        (_cell("run-strict", 1.0, flagged=True), "REWARD"),
        (_cell("run-strict", None, flagged=True), "ERROR"),
        (_cell("run-strict", None, expects="no-reward"), "ok"),
        (_cell("run-strict", 1.0, expects="no-reward"), "REWARD"),
        (_cell("run-benchmark", 1.0, flagged=True), "ok"),
        (_cell("run-benchmark", 1.0), "UNFLAGGED"),
        (_cell("run-benchmark", 0.0), "ok"),
        (_cell("compute-score-strict", 0.0, skipped="not a model response"), "skipped"),
    ],
)
def test_a_cell_is_judged_by_what_its_hack_must_get(cell: Cell, verdict: str) -> None:
    assert cell.verdict == verdict


def test_the_cli_renders_recorded_cells_and_exits_1_on_a_reward(tmp_path: Path) -> None:
    from sandbox_runtime.cli import main

    cells = [_cell("run-strict", 0.0, flagged=True), _cell("swe-env", 1.0)]
    recorded = tmp_path / "cells.json"
    recorded.write_text(json.dumps([c.to_dict() for c in cells]))
    table = tmp_path / "matrix.md"
    assert main(["redteam", "--render", str(recorded), "--markdown", str(table)]) == 1
    text = table.read_text()
    assert "| `h` | test-infrastructure | flagged | 0 f | **1 REWARD** |" in text
    cells[1].reward = 0.0
    cells[1].flagged = True
    recorded.write_text(json.dumps([c.to_dict() for c in cells]))
    assert main(["redteam", "--render", str(recorded)]) == 0
