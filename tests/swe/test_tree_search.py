"""``examples/tree_search.py``: k continuations from a checkpoint, the passing one kept."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from sandbox_runtime import list_checkpoints
from tests.conftest import docker_problem, require

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "tree_search.py"


@pytest.mark.slow
@pytest.mark.parametrize(
    ("backend", "mode"), [("local", "rollback"), ("local", "fork"), ("docker", "rollback")]
)
def test_tree_search_keeps_the_continuation_whose_tests_pass(
    tmp_path: Path, backend: str, mode: str
) -> None:
    """On docker, rollback once crashed deleting a checkpoint its sandbox still ran."""
    if backend == "docker":
        require(docker_problem())
    # local without namespaces: the example's tests run with this interpreter's pytest.
    where = ["--base-dir", str(tmp_path), "--isolation", "none"] if backend == "local" else []
    before = _example_checkpoints(backend)
    done = subprocess.run(
        [sys.executable, str(EXAMPLE), "--backend", backend, "--mode", mode, *where],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert [(t["name"], t["reward"]) for t in document["tried"]] == [
        ("change-nothing", 0.0),
        ("break-the-module", 0.0),
        ("apply-the-fix", 1.0),
    ]
    assert document["kept"] == "apply-the-fix"
    assert document["reward"] == 1.0
    # The kept state: the fix and what the episode did before the checkpoint, nothing of the
    # wrong turns (no "a wrong turn" line), nothing the tests left behind.
    patch = document["patch"]
    assert "+    return -(-total // per_page)" in patch
    assert "+++ b/reproduce_issue.py" in patch
    assert "wrong turn" not in patch
    assert "r2e_tests" not in patch
    if mode == "rollback":
        assert set(document["timings"]) == {"checkpoint", "rollback_1", "rollback_2"}
    else:
        assert set(document["timings"]) == {"fork"}
    # Every checkpoint the search took is deleted, and every sandbox is gone.
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(("ckpt-", "sbx-"))] == []
    assert _example_checkpoints(backend) <= before


def _example_checkpoints(backend: str) -> set[str]:
    """The example's checkpoints the engine holds (docker; local's live under tmp_path)."""
    if backend != "docker":
        return set()
    return {item.id for item in list_checkpoints("docker", labels={"example": "tree-search"})}
