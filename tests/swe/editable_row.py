"""A real-shaped SWE-bench row whose evaluation reinstalls its package (``pip install -e .``).

Modelled on ``pallets__flask-4992`` (tests/swe/real): a ``src``-layout package that the tests
import only once installed, a gold patch that adds a parameter, a ``test_patch`` that adds
the FAIL_TO_PASS test, and an evaluation that reinstalls the package editable before the
tests as the SWE-bench harness's eval script does (``python -m pip install -e .``).  The
evaluation script is the row's own (``eval_script``), written as the harness writes one but
with paths relative to the repository, so it runs on every backend and isolation mode.

The repository is made here as one git commit with fixed dates, so the base commit is the
same on the local template directory and in the docker image built from it.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any

INSTANCE_ID = "confkit__confkit-12"
_FILES = {
    "pyproject.toml": (
        "[build-system]\n"
        'requires = ["setuptools>=64", "wheel"]\n'
        'build-backend = "setuptools.build_meta"\n\n'
        "[project]\n"
        'name = "confkit"\n'
        'version = "1.0.0"\n\n'
        "[tool.setuptools.packages.find]\n"
        'where = ["src"]\n'
    ),
    "src/confkit/__init__.py": 'from confkit.values import to_bool\n\n__all__ = ["to_bool"]\n',
    "src/confkit/values.py": (
        '_TRUE = ("1", "true", "yes")\n'
        '_FALSE = ("0", "false", "no")\n\n\n'
        "def to_bool(text):\n"
        '    """A configuration value as a bool."""\n'
        "    word = text.strip().lower()\n"
        "    if word in _TRUE:\n"
        "        return True\n"
        "    if word in _FALSE:\n"
        "        return False\n"
        '    raise ValueError(f"not a boolean: {text!r}")\n'
    ),
    "tests/test_values.py": (
        "import pytest\n\n"
        "from confkit import to_bool\n\n\n"
        "def test_yes_is_true():\n"
        '    assert to_bool(" Yes ") is True\n\n\n'
        "def test_no_is_false():\n"
        '    assert to_bool("no") is False\n\n\n'
        "def test_other_words_raise():\n"
        "    with pytest.raises(ValueError):\n"
        '        to_bool("maybe")\n'
    ),
}
GOLD_PATCH = (
    "diff --git a/src/confkit/values.py b/src/confkit/values.py\n"
    "--- a/src/confkit/values.py\n"
    "+++ b/src/confkit/values.py\n"
    "@@ -1,5 +1,5 @@\n"
    '-_TRUE = ("1", "true", "yes")\n'
    '-_FALSE = ("0", "false", "no")\n'
    '+_TRUE = ("1", "true", "yes", "on")\n'
    '+_FALSE = ("0", "false", "no", "off")\n'
    " \n"
    " \n"
    " def to_bool(text):\n"
)
TEST_PATCH = """\
diff --git a/tests/test_values.py b/tests/test_values.py
--- a/tests/test_values.py
+++ b/tests/test_values.py
@@ -15,3 +15,8 @@ def test_no_is_false():
 def test_other_words_raise():
     with pytest.raises(ValueError):
         to_bool("maybe")
+
+
+def test_on_and_off():
+    assert to_bool("on") is True
+    assert to_bool("OFF") is False
"""
FAIL_TO_PASS = ["tests/test_values.py::test_on_and_off"]
PASS_TO_PASS = [
    "tests/test_values.py::test_yes_is_true",
    "tests/test_values.py::test_no_is_false",
    "tests/test_values.py::test_other_words_raise",
]
#: The reinstall before the tests; offline (no build isolation: the environment's setuptools).
INSTALL = "python -m pip install --no-build-isolation --no-deps -e ."
_EVAL = """\
#!/bin/bash
set -uo pipefail
if [ -f /opt/miniconda3/bin/activate ]; then
  source /opt/miniconda3/bin/activate && conda activate testbed
fi
{install}
git checkout {base} tests/test_values.py
git apply -v - <<'EOF_114329324912'
{test_patch}EOF_114329324912
echo '>>>>> Start Test Output'
PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 python -m pytest -rA -p no:cacheprovider tests/test_values.py
echo '>>>>> End Test Output'
git checkout {base} tests/test_values.py
"""
_GIT_ENV = {
    "GIT_AUTHOR_NAME": "confkit",
    "GIT_AUTHOR_EMAIL": "confkit@example.invalid",
    "GIT_AUTHOR_DATE": "2023-02-01T12:00:00Z",
    "GIT_COMMITTER_NAME": "confkit",
    "GIT_COMMITTER_EMAIL": "confkit@example.invalid",
    "GIT_COMMITTER_DATE": "2023-02-01T12:00:00Z",
}
# The image's environment: a venv that sees the base image's pytest, with pip, setuptools
# and wheel from pinned wheels (tests/swe/real_images.py downloads and caches them).
_DOCKERFILE = """\
FROM {base}
COPY wheels /opt/wheels
COPY activate /opt/miniconda3/bin/activate
RUN python3 -m venv --without-pip --system-site-packages /opt/miniconda3/envs/testbed \\
 && /opt/miniconda3/envs/testbed/bin/python /opt/wheels/{pip_wheel}/pip install -q \\
      --no-index --find-links /opt/wheels pip setuptools wheel
COPY testbed /testbed
"""


def make_repository(target: Path) -> str:
    """The repository at its base commit in ``target`` (a new directory); the commit's hash."""
    for name, text in _FILES.items():
        path = target / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    env = {**os.environ, **_GIT_ENV}
    for argv in (["git", "init", "-q"], ["git", "add", "-A"], ["git", "commit", "-qm", "base"]):
        subprocess.run(argv, cwd=target, env=env, check=True, capture_output=True)
    done = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=target, check=True, capture_output=True, text=True
    )
    return done.stdout.strip()


def row(base_commit: str) -> dict[str, Any]:
    """The row, with the SWE-bench columns and the evaluation script."""
    return {
        "instance_id": INSTANCE_ID,
        "repo": "confkit/confkit",
        "base_commit": base_commit,
        "patch": GOLD_PATCH,
        "test_patch": TEST_PATCH,
        "problem_statement": 'to_bool("on") raises ValueError; "on"/"off" are booleans.',
        "hints_text": "",
        "created_at": "2023-02-01T12:00:00Z",
        "version": "1.0",
        "environment_setup_commit": base_commit,
        "FAIL_TO_PASS": FAIL_TO_PASS,
        "PASS_TO_PASS": PASS_TO_PASS,
        "eval_script": _EVAL.format(install=INSTALL, base=base_commit, test_patch=TEST_PATCH),
    }


def local_template(target: Path) -> tuple[Path, str]:
    """A local-backend template (``testbed/`` only: no Python environment of its own)."""
    base = make_repository(target / "testbed")
    return target, base


def build_image(base_image: str) -> tuple[str, str]:
    """The row's docker image (built once per content) and its base commit."""
    import docker

    from tests.swe.real_images import ACTIVATE_SHIM, BASE_WHEELS, _wheels

    pip_wheel = BASE_WHEELS[0].replace("==", "-") + "-py3-none-any.whl"
    dockerfile = _DOCKERFILE.format(base=base_image, pip_wheel=pip_wheel)
    client = docker.from_env(timeout=600)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            context = Path(tmp)
            base = make_repository(context / "testbed")
            digest = hashlib.sha256()
            for part in (dockerfile, ACTIVATE_SHIM, client.images.get(base_image).id, base):
                digest.update(part.encode())
            tag = f"sandbox-runtime-test/{INSTANCE_ID.replace('__', '-')}:{digest.hexdigest()[:16]}"
            try:
                client.images.get(tag)
                return tag, base
            except docker.errors.ImageNotFound:
                pass
            _wheels(BASE_WHEELS, context / "wheels")
            (context / "activate").write_text(ACTIVATE_SHIM)
            (context / "Dockerfile").write_text(dockerfile)
            client.images.build(path=str(context), tag=tag, rm=True, forcerm=True)
            return tag, base
    finally:
        client.close()
