"""The bundled sample tasks: small real repositories with a real bug, shipped in the package.

Each sample lives in ``sandbox_runtime/swe/bundled/<name>/``: ``repo/`` (the repository at
the buggy commit, with its existing tests), ``fix.patch`` (the gold fix), ``tests.patch``
(the tests the fix makes pass) and ``task.json`` (title and issue text).  From these the
project generates rows in the R2E-Gym and SWE-bench shapes (``bundled/r2e.jsonl`` and
``bundled/swebench.jsonl``, see :mod:`sandbox_runtime.swe.samples_build`), so the samples
go through exactly the code real rows go through.

A sample's environment is built the way R2E-Gym builds its images: a root tree with the
repository committed at ``/testbed``, ``/testbed/run_tests.sh`` and the held-out tests in
``/r2e_tests``.  :func:`template_dir` writes that tree to a cache directory, which the
``local`` backend copies as the sandbox's ``/``; :mod:`sandbox_runtime.swe.images` builds a
Docker image from the same tree.  The git commits are made with a fixed identity and date,
so the base commit named in the rows is the commit every machine builds.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path

__all__ = [
    "IMAGE_PREFIX",
    "Sample",
    "bundled_rows_path",
    "is_sample_image",
    "load_sample",
    "sample_names",
    "template_dir",
]

#: Images of the bundled samples are named ``sandbox-runtime-samples/<name>:latest``.
IMAGE_PREFIX = "sandbox-runtime-samples/"
#: Bumped whenever the template layout changes, so caches and images are rebuilt.
LAYOUT_VERSION = "1"

_GIT_ENV = {
    "GIT_AUTHOR_NAME": "sandbox-runtime samples",
    "GIT_AUTHOR_EMAIL": "samples@sandbox-runtime.invalid",
    "GIT_AUTHOR_DATE": "2026-11-22T00:00:00+00:00",
    "GIT_COMMITTER_NAME": "sandbox-runtime samples",
    "GIT_COMMITTER_EMAIL": "samples@sandbox-runtime.invalid",
    "GIT_COMMITTER_DATE": "2026-11-22T00:00:00+00:00",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
}

RUN_TESTS_SH = """#!/bin/bash
# The task's held-out tests, run from the repository root as R2E-Gym images run them
# (pytest -rA r2e_tests). Where pytest is not installed, the standard library's runner
# stands in; the grader reads either output.
PY="$(command -v python || command -v python3)"
if "$PY" -c 'import pytest' 2>/dev/null; then
  PYTHONWARNINGS='ignore::UserWarning,ignore::SyntaxWarning' \\
    "$PY" -W ignore -m pytest -rA -p no:cacheprovider r2e_tests
else
  "$PY" -m unittest discover -v -s r2e_tests -t . 2>&1
fi
"""


def _root() -> Path:
    return Path(str(resources.files("sandbox_runtime.swe").joinpath("bundled")))


@cache
def sample_names() -> tuple[str, ...]:
    """Names of the bundled samples, sorted."""
    return tuple(sorted(p.name for p in _root().iterdir() if (p / "task.json").is_file()))


def bundled_rows_path(shape: str) -> Path:
    """The generated rows of every sample in one shape: ``r2e`` or ``swebench``."""
    if shape not in ("r2e", "swebench"):
        raise ValueError(f"unknown sample row shape {shape!r}: use 'r2e' or 'swebench'")
    return _root() / f"{shape}.jsonl"


def is_sample_image(image: str | None) -> bool:
    """Whether ``image`` names a bundled sample's image."""
    return bool(image) and str(image).startswith(IMAGE_PREFIX)


@dataclass(frozen=True)
class Sample:
    """One bundled sample task, read from the package."""

    name: str
    directory: Path
    title: str
    problem_statement: str
    version: str
    created_at: str

    @property
    def image(self) -> str:
        """The Docker image name the rows use."""
        return f"{IMAGE_PREFIX}{self.name}:latest"

    @property
    def repo_files(self) -> dict[str, bytes]:
        """The repository at the buggy commit: relative path -> content."""
        repo = self.directory / "repo"
        return {
            p.relative_to(repo).as_posix(): p.read_bytes()
            for p in sorted(repo.rglob("*"))
            if p.is_file() and "__pycache__" not in p.parts
        }

    @property
    def fix_patch(self) -> str:
        """The gold fix."""
        return (self.directory / "fix.patch").read_text(encoding="utf-8")

    @property
    def tests_patch(self) -> str:
        """The tests that fail before the fix and pass after it."""
        return (self.directory / "tests.patch").read_text(encoding="utf-8")

    def digest(self) -> str:
        """A hash of everything the environment is built from (cache and image key)."""
        h = hashlib.sha256(f"layout {LAYOUT_VERSION}\n{RUN_TESTS_SH}".encode())
        for path, data in self.repo_files.items():
            h.update(path.encode() + b"\0" + data + b"\0")
        h.update(self.tests_patch.encode())
        return h.hexdigest()[:16]


def load_sample(name: str) -> Sample:
    """Read the sample called ``name``; ``KeyError`` lists the names that exist."""
    if name not in sample_names():
        raise KeyError(f"no bundled sample {name!r}; samples: {', '.join(sample_names())}")
    directory = _root() / name
    meta = json.loads((directory / "task.json").read_text(encoding="utf-8"))
    return Sample(
        name=name,
        directory=directory,
        title=meta["title"],
        problem_statement=meta["problem_statement"],
        version=str(meta.get("version", "1.0")),
        created_at=str(meta.get("created_at", "")),
    )


def git(cwd: Path, *args: str, stdin: str | None = None) -> str:
    """Run git with the samples' fixed identity and no user configuration."""
    env = {**os.environ, **_GIT_ENV}
    result = subprocess.run(
        ["git", "-c", "core.autocrlf=false", "-c", "commit.gpgsign=false", *args],
        cwd=cwd,
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} failed in {cwd}: {result.stderr.strip()}")
    return result.stdout


def write_repo(sample: Sample, target: Path) -> str:
    """Write the buggy repository to ``target`` and commit it; returns the commit hash."""
    for path, data in sample.repo_files.items():
        file = target / path
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_bytes(data)
        file.chmod(0o644)
    git(target, "init", "-q")
    git(target, "checkout", "-q", "-b", "main")
    git(target, "add", "-A")
    git(target, "commit", "-q", "-m", f"{sample.name}: state before the fix")
    return git(target, "rev-parse", "HEAD").strip()


def tests_after_fix(sample: Sample) -> dict[str, str]:
    """The test files the tests patch touches, as they read after it: path -> text."""
    with tempfile.TemporaryDirectory(prefix="sandbox-runtime-sample-") as tmp:
        work = Path(tmp)
        write_repo(sample, work)
        git(work, "apply", "-", stdin=sample.tests_patch)
        names = (
            git(work, "diff", "--name-only").split()
            + git(work, "ls-files", "--others", "--exclude-standard").split()
        )
        return {name: (work / name).read_text(encoding="utf-8") for name in sorted(set(names))}


def _build_template(sample: Sample, target: Path) -> None:
    testbed = target / "testbed"
    testbed.mkdir(parents=True)
    write_repo(sample, testbed)
    (testbed / "run_tests.sh").write_text(RUN_TESTS_SH, encoding="utf-8")
    (testbed / "run_tests.sh").chmod(0o755)
    exclude = testbed / ".git" / "info" / "exclude"
    exclude.parent.mkdir(parents=True, exist_ok=True)
    with exclude.open("a", encoding="utf-8") as handle:
        handle.write("run_tests.sh\nr2e_tests\n")
    tests = target / "r2e_tests"
    tests.mkdir()
    (tests / "__init__.py").write_text("", encoding="utf-8")
    for index, (_, text) in enumerate(tests_after_fix(sample).items(), start=1):
        (tests / f"test_{index}.py").write_text(text, encoding="utf-8")
    (target / "root").mkdir()


def cache_root() -> Path:
    """Where built sample templates are kept (``$SANDBOX_RUNTIME_CACHE`` or ~/.cache)."""
    base = os.environ.get("SANDBOX_RUNTIME_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "sandbox-runtime"
    )
    return Path(base) / "samples"


def template_dir(name: str) -> Path:
    """The sample's root tree (built once, then reused): the ``local`` backend's image.

    Safe to call from several threads and processes: the tree is built in a private
    directory and renamed into place, and a loser of that race uses the winner's tree.
    """
    sample = load_sample(name)
    target = cache_root() / f"{name}-{sample.digest()}"
    if (target / "testbed" / ".git").is_dir():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=target.parent))
    try:
        _build_template(sample, staging / "tree")
        try:
            os.rename(staging / "tree", target)
        except OSError:
            if not (target / "testbed" / ".git").is_dir():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target
