"""Get a fresh sandbox ready for a task, the way each benchmark's own environment does.

* R2E-Gym images carry ``/testbed/run_tests.sh`` and the held-out tests in ``/r2e_tests``.
  R2E-Gym's ``setup_env`` moves both to ``/root`` so the agent does not see them, and links
  the tests back into the repository only while they run; we do the same (see
  :mod:`sandbox_runtime.swe.grading`) and also list both names in the repository's
  ``.git/info/exclude``, so neither ever shows up in the agent's patch.
* SWE-bench images are ready as they are.
* SWE-smith tasks start on the bug: the row's ``base_commit`` (or the branch named after the
  instance) when the image has it, else the row's bug ``patch`` applied and committed here.

Everything goes through :class:`~sandbox_runtime.SandboxRuntime`, with paths relative to
the workdir: on the ``local`` backend an absolute path in a command means a host path, while
``../root`` from ``/testbed`` means the sandbox's ``/root`` everywhere.
"""

from __future__ import annotations

import posixpath
import shlex

from sandbox_runtime.errors import SandboxError
from sandbox_runtime.runtime import SandboxRuntime
from sandbox_runtime.swe.task import Task, TaskFormat

__all__ = [
    "R2E_ALT_PATH",
    "R2E_TESTS_IMAGE_PATH",
    "SetupError",
    "prepare",
    "r2e_setup_script",
    "rel",
]

#: Where R2E-Gym hides ``run_tests.sh`` and ``r2e_tests`` from the agent.
R2E_ALT_PATH = "/root"
#: Where R2E-Gym images carry the held-out tests.
R2E_TESTS_IMAGE_PATH = "/r2e_tests"
_GIT = "git -c safe.directory='*'"
_IDENTITY = "-c user.name=sandbox-runtime -c user.email=sandbox-runtime@localhost"


class SetupError(SandboxError):
    """The task's environment could not be prepared in the sandbox."""


def rel(sandbox: SandboxRuntime, path: str) -> str:
    """``path`` relative to the sandbox's workdir, quoted for a shell."""
    return shlex.quote(posixpath.relpath(path, sandbox.workdir))


def prepare(task: Task, sandbox: SandboxRuntime) -> None:
    """Run the task's environment setup in a started sandbox; raises :class:`SetupError`."""
    if not sandbox.exists(sandbox.workdir):
        raise SetupError(f"the task's workdir {sandbox.workdir} does not exist in the sandbox")
    if task.format is TaskFormat.R2E:
        _prepare_r2e(sandbox)
    elif task.format is TaskFormat.SWESMITH:
        _prepare_swesmith(task, sandbox)


def r2e_setup_script(workdir: str) -> str:
    """The shell script, run in ``workdir``, that readies an R2E-Gym image as RepoEnv does.

    It is idempotent (a second run finds nothing left to move), and its paths are relative
    to the workdir so that it means the same on every backend.
    """
    alt = shlex.quote(posixpath.relpath(R2E_ALT_PATH, workdir))
    image_tests = shlex.quote(posixpath.relpath(R2E_TESTS_IMAGE_PATH, workdir))
    return f"""
set -e
mkdir -p {alt}
if [ -e run_tests.sh ]; then mv -f run_tests.sh {alt}/run_tests.sh; fi
if [ -d {image_tests} ]; then
  rm -rf {alt}/r2e_tests r2e_tests
  mv {image_tests} {alt}/r2e_tests
elif [ -d r2e_tests ] && [ ! -L r2e_tests ]; then
  rm -rf {alt}/r2e_tests
  mv r2e_tests {alt}/r2e_tests
fi
find . -name '*.pyc' -delete 2>/dev/null || true
find . -name __pycache__ -prune -exec rm -rf {{}} + 2>/dev/null || true
find {alt}/r2e_tests -name __pycache__ -prune -exec rm -rf {{}} + 2>/dev/null || true
if exclude=$({_GIT} rev-parse --git-path info/exclude 2>/dev/null); then
  mkdir -p "$(dirname "$exclude")"
  grep -qx r2e_tests "$exclude" 2>/dev/null || printf 'run_tests.sh\\nr2e_tests\\n' >> "$exclude"
fi
"""


def _prepare_r2e(sandbox: SandboxRuntime) -> None:
    result = sandbox.exec(r2e_setup_script(sandbox.workdir), timeout=120)
    if not result.ok:
        raise SetupError(f"R2E-Gym setup failed: {result.output.strip()[-2000:]}")


def _prepare_swesmith(task: Task, sandbox: SandboxRuntime) -> None:
    for ref in (task.base_commit, task.task_id):
        if not ref:
            continue
        quoted = shlex.quote(ref)
        check = sandbox.exec(f"{_GIT} rev-parse -q --verify {quoted}^{{commit}}", timeout=60)
        if check.ok:
            result = sandbox.exec(f"{_GIT} checkout -q {quoted}", timeout=120)
            if not result.ok:
                raise SetupError(f"git checkout {ref} failed: {result.output.strip()}")
            return
    applied = sandbox.apply_patch(task.gold_patch)
    if not applied:
        raise SetupError(f"the SWE-smith bug patch did not apply: {applied.message}")
    commit = sandbox.exec(
        f"{_GIT} add -A && {_GIT} {_IDENTITY} commit -q -m {shlex.quote('bug: ' + task.task_id)}",
        timeout=120,
    )
    if not commit.ok:
        raise SetupError(f"committing the SWE-smith bug failed: {commit.output.strip()}")
