"""Images of real SWE-bench instances, built offline from what ``tests/swe/real/`` vendors.

Each ``tests/swe/real/<instance_id>/`` holds a published row (``row.jsonl``) and its
repository at the row's base commit, trimmed (``testbed.tar.xz``; its README says what was
left out and why).  The image is the test base image plus:

* ``/testbed``: the tarball, committed as one commit, with ``refs/replace/<base_commit>``
  pointing at it, so the harness's ``git checkout <base_commit> -- <tests>`` and ``git diff
  <base_commit>`` read that tree (the real commit's history is not vendored);
* ``/opt/miniconda3/envs/testbed``: a venv of the image's python3 with pip, setuptools, wheel
  and the row's pure-python dependencies, installed from wheels downloaded on the host
  (PyPI is the only index CI reaches), and the repository installed editable, as the
  harness's images have it; its ``pip.conf`` points pip at those wheels only, so the
  harness's ``python -m pip install -e .`` runs offline;
* ``/opt/miniconda3/bin/activate``: a shim for the two conda lines of every SWE-bench eval
  script (``source /opt/miniconda3/bin/activate; conda activate testbed``), which puts the
  venv first on ``PATH``.

The tag carries a digest of everything that goes in, so a rerun reuses the image.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any

REAL = Path(__file__).parent / "real"

#: Wheels every real image gets (pinned, so the digest names what is inside).
BASE_WHEELS = ("pip==24.2", "setuptools==70.0.0", "wheel==0.43.0")
#: Each instance's own pure-python dependencies (the harness's ``pip_packages``).
INSTANCE_WHEELS = {
    "sympy__sympy-24661": ("mpmath==1.3.0",),
    # The spec's pins for flask 2.3, but MarkupSafe 2.1.2: 2.1.1 has no CPython 3.11 wheel.
    # pytest and its dependencies at the versions of the base commit's requirements/tests.txt.
    "pallets__flask-4992": (
        "Werkzeug==2.3.7",
        "Jinja2==3.1.2",
        "itsdangerous==2.1.2",
        "click==8.1.3",
        "MarkupSafe==2.1.2",
        "pytest==7.2.1",
        "attrs==22.2.0",
        "iniconfig==2.0.0",
        "packaging==23.0",
        "pluggy==1.0.0",
    ),
    # The spec installs ``-e '.[dev]'`` (and the eval script again), so the image holds the
    # whole closure of the base commit's dev extra (pytest, pytz, simplejson, flake8==3.7.8,
    # flake8-bugbear==19.8.0, pre-commit~=1.17, tox) as pip resolved it for Python 3.11 on
    # 2026-11-26, with pytest held below 8 (the tests are of 2019).
    "marshmallow-code__marshmallow-1359": (
        "pytest==7.4.4",
        "iniconfig==2.3.1",
        "packaging==26.4",
        "pluggy==1.7.0",
        "pytz==2026.6",
        "simplejson==4.3.0",
        "flake8==3.7.8",
        "entrypoints==0.3",
        "mccabe==0.6.1",
        "pycodestyle==2.5.0",
        "pyflakes==2.1.1",
        "flake8-bugbear==19.8.0",
        "attrs==26.1.0",
        "pre-commit==1.21.0",
        "aspy.yaml==1.3.0",
        "cfgv==3.5.0",
        "identify==2.6.20",
        "nodeenv==1.12.0",
        "pyyaml==6.0.4",
        "six==1.17.0",
        "toml==0.10.2",
        "virtualenv==21.15.11",
        "distlib==0.4.4",
        "filelock==4.3.1",
        "platformdirs==4.14.8",
        "python-discovery==1.9.6",
        "tox==4.67.15",
        "cachetools==8.0.2",
        "colorama==0.4.6",
        "pyproject-api==1.12.1",
        "tomli-w==1.2.0",
        "typing-extensions==4.16.0",
    ),
}

ACTIVATE_SHIM = """\
# sandbox-runtime test shim for SWE-bench eval scripts: `conda activate ENV` selects the venv
# /opt/miniconda3/envs/ENV; there is no conda here.
conda() {
  if [ "${1:-}" = activate ] && [ -d "/opt/miniconda3/envs/${2:-}" ]; then
    export VIRTUAL_ENV="/opt/miniconda3/envs/$2" CONDA_DEFAULT_ENV="$2"
    export CONDA_PREFIX="$VIRTUAL_ENV" PATH="/opt/miniconda3/envs/$2/bin:$PATH"
    hash -r
    return 0
  fi
  echo "conda shim: only 'conda activate ENV' with an ENV under /opt/miniconda3/envs" >&2
  return 1
}
"""

DOCKERFILE = """\
FROM {base}
COPY wheels /opt/wheels
COPY activate /opt/miniconda3/bin/activate
RUN python3 -m venv --without-pip /opt/miniconda3/envs/testbed \\
 && /opt/miniconda3/envs/testbed/bin/python /opt/wheels/{pip_wheel}/pip install -q \\
      --no-index --find-links /opt/wheels {packages} \\
 && printf '[global]\\nno-index = true\\nfind-links = /opt/wheels\\n' \\
      > /opt/miniconda3/envs/testbed/pip.conf
ADD testbed.tar.xz /testbed/
RUN cd /testbed && git init -q && git add -A \\
 && git -c user.name=sandbox-runtime -c user.email=tests@sandbox-runtime.invalid \\
      commit -q -m "{instance_id} at {base_commit} (trimmed, see tests/swe/real)" \\
 && git update-ref refs/replace/{base_commit} HEAD \\
 && . /opt/miniconda3/bin/activate && conda activate testbed \\
 && python -m pip install -q -e . && git status --porcelain | (! grep -q .)
"""


def real_row(instance_id: str) -> dict[str, Any]:
    """The published row of a vendored instance."""
    row: dict[str, Any] = json.loads((REAL / instance_id / "row.jsonl").read_text())
    return row


def _wheels(specs: tuple[str, ...], into: Path) -> None:
    """Download pinned wheels (cached across runs under ~/.cache)."""
    cache = Path.home() / ".cache" / "sandbox-runtime-tests" / "wheels"
    cache.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "-q",
            "--only-binary=:all:",
            "--no-deps",
            "--dest",
            str(cache),
            *specs,
        ],
        check=True,
        capture_output=True,
    )
    into.mkdir()
    by_name_version = {
        (_normalized(wheel.name.split("-")[0]), wheel.name.split("-")[1]): wheel
        for wheel in cache.glob("*.whl")
    }
    for spec in specs:
        name, _, version = spec.partition("==")
        found = by_name_version[(_normalized(name), version)]
        shutil.copy(found, into / found.name)


def _normalized(name: str) -> str:
    """A project name as wheel file names may spell it (Werkzeug, pre_commit, aspy.yaml)."""
    return re.sub(r"[-_.]+", "_", name).lower()


def _dockerfile(instance_id: str, base: str, specs: tuple[str, ...]) -> str:
    row = real_row(instance_id)
    packages = " ".join(spec.partition("==")[0] for spec in specs)
    pip = BASE_WHEELS[0].replace("==", "-") + "-py3-none-any.whl"
    return DOCKERFILE.format(
        base=base,
        pip_wheel=pip,
        packages=packages,
        instance_id=instance_id,
        base_commit=row["base_commit"],
    )


def build_real_image(instance_id: str, base: str) -> str:
    """The instance's image (built once; reused while nothing that goes in changes)."""
    import docker

    specs = BASE_WHEELS + INSTANCE_WHEELS.get(instance_id, ())
    tarball = REAL / instance_id / "testbed.tar.xz"
    dockerfile = _dockerfile(instance_id, base, specs)
    client = docker.from_env(timeout=600)
    try:
        digest = hashlib.sha256()
        for part in (dockerfile, ACTIVATE_SHIM, client.images.get(base).id):
            digest.update(part.encode())
        digest.update(tarball.read_bytes())
        tag = f"sandbox-runtime-test/swe-real-{instance_id}:{digest.hexdigest()[:16]}"
        try:
            client.images.get(tag)
            return tag
        except docker.errors.ImageNotFound:
            pass
        with tempfile.TemporaryDirectory() as tmp:
            context = Path(tmp)
            _wheels(specs, context / "wheels")
            shutil.copy(tarball, context / "testbed.tar.xz")
            (context / "activate").write_text(ACTIVATE_SHIM)
            (context / "Dockerfile").write_text(dockerfile)
            client.images.build(path=str(context), tag=tag, rm=True, forcerm=True)
        return tag
    finally:
        client.close()


def local_template(image: str, target: Path) -> Path:
    """The image's ``/testbed`` and ``/opt`` as a local-backend template directory.

    The venv's ``python`` links to ``/usr/bin/python3``, which in a namespaced local
    sandbox is the host's: the host needs the image's Python minor version (3.11).
    """
    import docker

    if (target / "testbed").is_dir():
        return target
    client = docker.from_env(timeout=600)
    container = client.containers.create(image, command="true")
    try:
        stream = io.BytesIO(b"".join(container.export()))
    finally:
        container.remove(force=True)
        client.close()
    with tarfile.open(fileobj=stream) as archive:
        wanted = [
            member
            for member in archive.getmembers()
            if member.name.split("/", 1)[0] in ("testbed", "opt") and not member.isdev()
        ]
        archive.extractall(target, members=wanted, filter="tar")
    return target
