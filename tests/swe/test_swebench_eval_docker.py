"""A test patch that adds a non-test file, graded in a container: gold 1, null 0, never a lie.

The repository is a small one written here (the bundled samples' style); its test patch adds a
fixture ``tests/static/config.toml`` and a test that reads it, as real rows do (the harness
drops such paths from the runner's targets: its ``NON_TEST_EXTS``).  Graded twice: as a
repository swebench does not know (the library's fallback) and as ``pytest-dev/pytest`` 5.4
(the harness's own recipe under swebench 3.x / 4.x; the fallback under 5.x).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from sandbox_runtime import SandboxRuntime
from sandbox_runtime.swe import Task, grade
from sandbox_runtime.swe._harness_spec import harness_spec
from sandbox_runtime.swe.formats.swebench import SWEBenchGrading

SOURCE = '''"""Read ``key = value`` lines."""


def load(path):
    values = {}
    with open(path) as handle:
        for line in handle:
            key, _, value = line.partition("=")
            values[key.strip()] = value
    return values
'''

TESTS = """import os

from cfgread import load

HERE = os.path.dirname(__file__)


def test_module_has_load():
    assert callable(load)
"""

GOLD = """diff --git a/cfgread/__init__.py b/cfgread/__init__.py
--- a/cfgread/__init__.py
+++ b/cfgread/__init__.py
@@ -6,5 +6,5 @@ def load(path):
     with open(path) as handle:
         for line in handle:
             key, _, value = line.partition("=")
-            values[key.strip()] = value
+            values[key.strip()] = value.strip()
     return values
"""

TEST_PATCH = """diff --git a/tests/static/config.toml b/tests/static/config.toml
new file mode 100644
--- /dev/null
+++ b/tests/static/config.toml
@@ -0,0 +1 @@
+name = "demo"
diff --git a/tests/test_cfg.py b/tests/test_cfg.py
--- a/tests/test_cfg.py
+++ b/tests/test_cfg.py
@@ -7,3 +7,7 @@ HERE = os.path.dirname(__file__)
{BLANK}
 def test_module_has_load():
     assert callable(load)
+
+
+def test_reads_the_fixture():
+    assert load(os.path.join(HERE, "static", "config.toml")) == {"name": '"demo"'}
""".replace("{BLANK}", " ")  # a context line for the blank line (no trailing blank in source)

F2P = ("tests/test_cfg.py::test_reads_the_fixture",)
P2P = ("tests/test_cfg.py::test_module_has_load",)


@pytest.fixture
def sandbox(docker_image: str) -> Iterator[SandboxRuntime]:
    with SandboxRuntime(backend="docker", image=docker_image, workdir="/testbed") as box:
        box.write_text("/testbed/cfgread/__init__.py", SOURCE)
        box.write_text("/testbed/tests/test_cfg.py", TESTS)
        # A root conftest puts the repository on sys.path for a bare ``pytest`` (the
        # harness's command), as the harness's images do by installing the package.
        box.write_text("/testbed/conftest.py", "")
        ident = "-c user.name=t -c user.email=t@t"
        assert box.exec(f"git init -q . && git add -A && git {ident} commit -qm base").ok
        box.base_commit()
        yield box


def _task(repo: str, version: str = "1.0", f2p: tuple[str, ...] = F2P) -> Task:
    return Task(
        task_id=f"{repo.replace('/', '__')}-1",
        format="swebench",
        repo=repo,
        image="unused",
        workdir="/testbed",
        problem_statement="load keeps the newline",
        gold_patch=GOLD,
        grading=SWEBenchGrading(
            fail_to_pass=f2p, pass_to_pass=P2P, test_patch=TEST_PATCH, version=version
        ),
    )


@pytest.mark.parametrize(
    ("repo", "version"),
    [("sandbox-runtime-samples/cfgread", "1.0"), ("pytest-dev/pytest", "5.4")],
)
def test_a_non_test_file_in_test_patch_gives_gold_1_and_null_0(
    sandbox: SandboxRuntime, repo: str, version: str
) -> None:
    task = _task(repo, version)
    null = grade(task, sandbox)
    assert sandbox.diff() == ""  # the test patch, fixture included, is gone again
    assert sandbox.apply_patch(GOLD)
    gold = grade(task, sandbox)
    assert (null.reward, null.reason) == (0.0, f"tests failed: {F2P[0]}"), null.test_output
    assert (gold.reward, gold.reason) == (1.0, "resolved"), gold.test_output
    by_recipe = repo == "pytest-dev/pytest" and harness_spec(repo, version, TEST_PATCH) is not None
    for result in (null, gold):
        assert ("(script: swebench " in result.parser) == by_recipe, result.parser
        assert "config.toml" not in "".join(result.status_map)
        assert "found no collectors" not in result.test_output
        assert "no match in any of" not in result.test_output


def test_a_log_that_cannot_be_matched_gives_no_verdict(sandbox: SandboxRuntime) -> None:
    renamed = (F2P[0] + "_renamed_upstream",)  # the row names a test the run never reports
    task = _task("sandbox-runtime-samples/cfgread", f2p=renamed)
    assert sandbox.apply_patch(GOLD)
    result = grade(task, sandbox)
    assert result.reward is None, result.test_output
    assert result.reason.startswith("test error: the log does not name the row's tests")
    assert renamed[0] in result.reason


def test_a_run_that_collected_nothing_is_no_test_results_not_a_zero(
    sandbox: SandboxRuntime,
) -> None:
    # A row's own script that hands pytest only a fixture file: pytest prints
    # "ERROR: found no collectors ..." (or "not found"), collects nothing and exits 4.
    script = (
        "mkdir -p tests/static && echo 'a = 1' > tests/static/config.toml\n"
        "echo '>>>>> Start Test Output'\n"
        "pytest -rA -p no:cacheprovider tests/static/config.toml 2>&1\n"
        "echo '>>>>> End Test Output'\n"
        "rm -rf tests/static\n"
    )
    grading = _task("pytest-dev/pytest").grading_as(SWEBenchGrading)
    task = _task("pytest-dev/pytest").model_copy(
        update={"grading": grading.model_copy(update={"eval_script": script})}
    )
    result = grade(task, sandbox)
    assert "ERROR: " in result.test_output  # pytest's own error line was there
    assert result.status_map == {}
    assert result.reward is None
    assert result.reason == "test error: no test results in the output (exit code 0)"
