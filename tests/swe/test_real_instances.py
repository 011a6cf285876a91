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

INSTANCES = [
    # sympy: the harness runs ``bin/test -C --verbose``, and the row's ids are bare names.
    "sympy__sympy-24661",
    # flask: the test_patch adds a non-test file (tests/static/config.toml), and three
    # PASS_TO_PASS ids are parametrized with brackets (test_from_pyfile_weird_encoding[utf-8]).
    "pallets__flask-4992",
    # marshmallow: 76 PASS_TO_PASS ids, 54 parametrized with brackets, 8 of them cut at the
    # first space as the harness's log parser cuts them (test_fail[required-Missing).
    "marshmallow-code__marshmallow-1359",
]


def _task(instance_id: str, image: str) -> Task:
    return parse_row(real_row(instance_id)).model_copy(update={"image": image})


@pytest.fixture(scope="module", params=INSTANCES)
def instance_id(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    return name


@pytest.fixture(scope="module")
def real_image(docker_image: str, instance_id: str) -> str:
    return build_real_image(instance_id, DOCKER_IMAGE)


@pytest.fixture(scope="module")
def on_docker(instance_id: str, real_image: str) -> RowCheck:
    """Gold and null on docker, and the harness's runs when it can run here."""
    harness = compare_with_harness if harness_problem() is None else None
    return check_task(_task(instance_id, real_image), RunOptions(backend="docker"), harness=harness)


def _assert_gold_one_null_zero(instance_id: str, checked: RowCheck) -> None:
    assert checked.gold is not None
    assert checked.null is not None
    assert checked.gold.reward == 1.0, checked.gold.reason
    assert checked.null.reward == 0.0, checked.null.reason
    for test_id in real_row(instance_id)["FAIL_TO_PASS"]:
        assert checked.null.status_map.get(test_id) == "FAILED", test_id
    assert checked.disagreements == []
    assert checked.diagnosis.startswith("OK")


def test_gold_one_null_zero_on_docker(instance_id: str, on_docker: RowCheck) -> None:
    _assert_gold_one_null_zero(instance_id, on_docker)


def test_harness_agrees_id_by_id(on_docker: RowCheck) -> None:
    require(harness_problem())
    harness = on_docker.harness
    assert harness is not None
    assert harness["runs"]["gold"]["resolved"] is True
    assert harness["runs"]["null"]["resolved"] is False
    assert harness["differences"] == []
    assert harness["agrees"] is True


def test_gold_one_null_zero_on_local_namespace(
    instance_id: str, real_image: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    require(bwrap_problem())
    template = local_template(real_image, Path(tmp_path_factory.mktemp(f"{instance_id}-template")))
    options = RunOptions(backend="local", backend_options={"isolation": "namespace"})
    _assert_gold_one_null_zero(instance_id, check_task(_task(instance_id, str(template)), options))
