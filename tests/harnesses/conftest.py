"""The harness adapters' tests: they need their harness (mini-swe-agent, inspect-ai, swe-rex).

The harnesses do not share the main test venv (their dependencies would move packages the
rest of the suite pins), so ``scripts/test.sh`` runs these files in ``.venv-harness`` with
``SANDBOX_RUNTIME_HARNESS_TESTS=1``; there a missing harness fails the run.  Elsewhere a file
whose harness is not installed is not collected.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator
from typing import Any

import pytest

from sandbox_runtime.integrations._harness_tasks import load_task
from sandbox_runtime.swe.images import build_sample_image
from sandbox_runtime.swe.samples import is_sample_image
from tests.harnesses.harbor_double import harbor_imports
from tests.swe.conftest import _sample_cache

__all__ = ["_sample_cache"]

#: The bundled task the harnesses' runners complete (gold 1, null 0).
TASK_SOURCE = "bundled:r2e"
TASK_ID = "csvline__c2144404831e"


@pytest.fixture
def ags_task_emulator(docker_image: str) -> Iterator[Any]:
    """An AGS emulator whose instances run the bundled task's image, as a real AGS would.

    Its instances are Docker containers of the instance's image: the emulator's ``local``
    instances run the host's filesystem and ignore images, so the task's repository would not
    be at its workdir.  The emulator never pulls, so the task's sample image is built into the
    engine first, as ``sandbox-runtime ags sync`` puts an image in a real AGS's registry.  The
    ``ags`` backend finds the emulator through the variables AGS users export
    (``emulator.environment()``).
    """
    from sandbox_runtime_emulators.ags.server import AgsEmulator

    image = load_task(TASK_SOURCE, TASK_ID).image
    assert image is not None
    assert is_sample_image(image), image
    build_sample_image(image.split("/", 1)[1].split(":", 1)[0], base=docker_image)
    with AgsEmulator(backend="docker", default_image=docker_image) as emulator:
        yield emulator


# test_harbor.py needs no harness installed (Harbor does not import on 3.11; the test brings
# a double of its interface), so it is collected everywhere; test_harbor_runner.py below.
_NEEDS = {
    "test_minisweagent.py": "minisweagent",
    "test_inspect.py": "inspect_ai",
    "test_inspect_conformance.py": "inspect_ai",
    "test_swerex.py": "swerex",
}

collect_ignore = [
    name
    for name, module in _NEEDS.items()
    if os.environ.get("SANDBOX_RUNTIME_HARNESS_TESTS") != "1"
    and importlib.util.find_spec(module) is None
]
# Harbor's own runner needs a Harbor that imports (Python 3.12+): scripts/harbor-e2e.sh runs it
# in a Debian 13 chroot with SANDBOX_RUNTIME_HARBOR_TESTS=1, where a Harbor that does not
# import fails the run.
if os.environ.get("SANDBOX_RUNTIME_HARBOR_TESTS") != "1" and not harbor_imports():
    collect_ignore.append("test_harbor_runner.py")
