"""Real SWE-bench instances, built offline at their base commits (``tests/swe/real``).

Each is checked as ``tasks check`` checks a row: the gold patch must resolve and no patch
must not, on docker and on the local backend with namespace isolation, and, where the
installed swebench carries the harness's specifications, the harness's own eval script in a
fresh sandbox of the same image must reach the same verdicts, id by id.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sandbox_runtime.swe.check import RowCheck, check_task
from sandbox_runtime.swe.check_harness import compare_with_harness, harness_problem
from sandbox_runtime.swe.rows import parse_row
from sandbox_runtime.swe.runner import RunOptions
from sandbox_runtime.swe.task import Task
from tests.conftest import DOCKER_IMAGE, bwrap_problem, require
from tests.swe.real_images import build_real_image, local_template, real_row

pytestmark = [pytest.mark.docker, pytest.mark.slow]

#: sympy: the harness runs ``bin/test -C --verbose``, and the row's ids are bare names.
SYMPY = "sympy__sympy-24661"


def _task(instance_id: str, image: str) -> Task:
    return parse_row(real_row(instance_id)).model_copy(update={"image": image})


@pytest.fixture(scope="module")
def sympy_image(docker_image: str) -> str:
    return build_real_image(SYMPY, DOCKER_IMAGE)


@pytest.fixture(scope="module")
def sympy_on_docker(sympy_image: str) -> RowCheck:
    """Gold and null on docker, and the harness's runs when it can run here."""
    harness = compare_with_harness if harness_problem() is None else None
    return check_task(_task(SYMPY, sympy_image), RunOptions(backend="docker"), harness=harness)


def _assert_gold_one_null_zero(checked: RowCheck) -> None:
    assert checked.gold is not None
    assert checked.null is not None
    assert checked.gold.reward == 1.0, checked.gold.reason
    assert checked.null.reward == 0.0, checked.null.reason
    assert checked.null.status_map.get("test_issue_24288") == "FAILED"
    assert checked.disagreements == []
    assert checked.diagnosis.startswith("OK")


def test_sympy_gold_one_null_zero_on_docker(sympy_on_docker: RowCheck) -> None:
    _assert_gold_one_null_zero(sympy_on_docker)


def test_sympy_harness_agrees_id_by_id(sympy_on_docker: RowCheck) -> None:
    require(harness_problem())
    harness = sympy_on_docker.harness
    assert harness is not None
    assert harness["runs"]["gold"]["resolved"] is True
    assert harness["runs"]["null"]["resolved"] is False
    assert harness["differences"] == []
    assert harness["agrees"] is True


def test_sympy_gold_one_null_zero_on_local_namespace(
    sympy_image: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    require(bwrap_problem())
    template = local_template(sympy_image, Path(tmp_path_factory.mktemp("sympy-template")))
    options = RunOptions(backend="local", backend_options={"isolation": "namespace"})
    _assert_gold_one_null_zero(check_task(_task(SYMPY, str(template)), options))
