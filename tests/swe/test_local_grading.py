"""Local grading stays local (issue 29 item 4): installs land in the sandbox, never the host.

A real-shaped row (tests/swe/editable_row.py) whose evaluation reinstalls its package with
``pip install -e .``, as the SWE-bench harness does, is graded with its gold patch and with
none at the same time, three times, on ``local`` in both isolation modes: gold 1 and null 0
every time, the same verdicts, id by id, as on docker, and the host's interpreter (its
``pip list``, its site-packages and the user site) is the same after as before.  Before, the
harness's ``python`` was the host's: the two gradings installed their trees into the user's
venv in turn and imported each other's code.

The host's ``python`` here is the test run's own venv, put first on ``PATH`` as an activated
venv is (the case the issue found).
"""

from __future__ import annotations

import json
import os
import site
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from sandbox_runtime.swe.check import GOLD, NULL, graded_run
from sandbox_runtime.swe.grading import GradeResult
from sandbox_runtime.swe.rows import parse_row
from sandbox_runtime.swe.runner import RunOptions
from sandbox_runtime.swe.task import Task
from tests.conftest import DOCKER_IMAGE, bwrap_problem, require
from tests.swe import editable_row

TRIALS = 3
#: What the row's lists say each run must show (and docker shows).
EXPECTED = {
    GOLD: {test_id: "PASSED" for test_id in editable_row.FAIL_TO_PASS + editable_row.PASS_TO_PASS},
    NULL: {
        **{test_id: "FAILED" for test_id in editable_row.FAIL_TO_PASS},
        **{test_id: "PASSED" for test_id in editable_row.PASS_TO_PASS},
    },
}


@pytest.fixture
def venv_on_path(monkeypatch: pytest.MonkeyPatch) -> str:
    """The test run's interpreter first on ``PATH``: the host ``python`` of local sandboxes."""
    folder = os.path.dirname(sys.executable)
    monkeypatch.setenv("PATH", os.pathsep.join([folder, os.environ.get("PATH", os.defpath)]))
    return sys.executable


def host_python_state(python: str) -> dict[str, Any]:
    """``pip list`` of the host's interpreter and the listing of its site directories."""
    listed = subprocess.run(
        [python, "-m", "pip", "list", "--format=json", "--disable-pip-version-check"],
        capture_output=True,
        text=True,
        check=True,
    )
    folders = [*site.getsitepackages(), site.getusersitepackages()]
    return {
        "pip list": json.loads(listed.stdout),
        "site": {f: sorted(os.listdir(f)) if os.path.isdir(f) else None for f in folders},
    }


def _verdicts(result: GradeResult) -> dict[str, str]:
    ids = editable_row.FAIL_TO_PASS + editable_row.PASS_TO_PASS
    return {test_id: result.status_map.get(test_id, "missing") for test_id in ids}


def _gold_and_null_at_once(task: Task, options: RunOptions) -> dict[str, GradeResult]:
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = {which: pool.submit(graded_run, task, options, which) for which in (GOLD, NULL)}
        return {which: future.result() for which, future in futures.items()}


@pytest.mark.parametrize("isolation", ["none", "namespace"])
def test_concurrent_gold_and_null_of_one_row_are_independent(
    isolation: str, venv_on_path: str, tmp_path: Path
) -> None:
    if isolation == "namespace":
        require(bwrap_problem())
    template, base = editable_row.local_template(tmp_path / "template")
    task = parse_row(editable_row.row(base)).model_copy(update={"image": str(template)})
    options = RunOptions(
        backend="local",
        backend_options={"isolation": isolation, "base_dir": str(tmp_path / "sandboxes")},
        test_timeout=300,
    )
    before = host_python_state(venv_on_path)
    for trial in range(TRIALS):
        runs = _gold_and_null_at_once(task, options)
        for which, result in runs.items():
            context = f"trial {trial}, {which}: {result.reason}\n{result.test_output[-3000:]}"
            assert result.reward == (1.0 if which == GOLD else 0.0), context
            assert _verdicts(result) == EXPECTED[which], context
    assert host_python_state(venv_on_path) == before
    assert not list((tmp_path / "sandboxes").glob("sbx-*"))  # every sandbox went away


@pytest.mark.docker
def test_docker_gives_the_same_verdicts(docker_image: str) -> None:
    image, base = editable_row.build_image(DOCKER_IMAGE)
    task = parse_row(editable_row.row(base)).model_copy(update={"image": image})
    runs = _gold_and_null_at_once(task, RunOptions(backend="docker", test_timeout=300))
    for which, result in runs.items():
        context = f"{which}: {result.reason}\n{result.test_output[-3000:]}"
        assert result.reward == (1.0 if which == GOLD else 0.0), context
        assert _verdicts(result) == EXPECTED[which], context
