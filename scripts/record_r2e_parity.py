"""Record R2E-Gym's own tool scripts answering the parity suite (tests/integrations/r2e_parity.py).

Usage (from the repository root, with the test venv and Docker)::

    .venv/bin/python scripts/record_r2e_parity.py /path/to/R2E-Gym [OUT]

``/path/to/R2E-Gym`` is a checkout of R2E-Gym at commit 0d94c4e (``git archive 0d94c4e src``
is enough); nothing of it is vendored here.  Its scripts are installed in the test image as
rLLM's ``RepoEnv`` installs them and called through :class:`SWEEnv` (``tools="r2egym"``) on
docker.  R2E-Gym's images carry chardet, which its file editor imports; the test image does
not, so the recording runs on ``sandbox-runtime-test/r2e-parity-record:bookworm``, the test
image plus the chardet this venv has (the version the library's editor decodes with).  The
answer to a reply that calls no tool is R2E-Gym's own ``Observation`` of an empty action.
OUT defaults to ``tests/fixtures/r2egym_parity.json``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import zipfile
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
R2EGYM_COMMIT = "0d94c4e"
RECORD_IMAGE = "sandbox-runtime-test/r2e-parity-record:bookworm"
BASE_IMAGE = "sandbox-runtime-test/base:bookworm"


def build_record_image(chardet_version: str) -> None:
    """The test image plus chardet ``chardet_version`` (CPython 3.11 wheel, as the image's)."""
    with tempfile.TemporaryDirectory() as scratch:
        where = Path(scratch)
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
             "--python-version", "3.11", "--platform", "manylinux_2_28_x86_64",
             f"chardet=={chardet_version}", "-d", str(where)],
            check=True,
        )  # fmt: skip
        wheel = next(where.glob("chardet-*.whl"))
        with zipfile.ZipFile(wheel) as archive:
            archive.extractall(where / "pkg")
        (where / "Dockerfile").write_text(
            f"FROM {BASE_IMAGE}\nCOPY pkg/ /usr/local/lib/python3.11/dist-packages/\n",
            encoding="utf-8",
        )
        subprocess.run(["docker", "build", "-q", "-t", RECORD_IMAGE, str(where)], check=True)


def no_tool_answer() -> str:
    """What R2E-Gym's ``Observation`` shows for a reply with no function call."""
    from r2egym.agenthub.action import Action
    from r2egym.agenthub.observation import Observation

    return str(Observation("", 0, Action("", {})))


def main(checkout: str, out: str = str(ROOT / "tests" / "fixtures" / "r2egym_parity.json")) -> None:
    """Record every case of the parity suite with the R2E-Gym scripts under ``checkout``."""
    sys.path[:0] = [str(Path(checkout).resolve() / "src"), str(ROOT)]
    import r2egym  # noqa: F401  (fails early where the checkout has no R2E-Gym sources)
    from tests.integrations.r2e_parity import STEP_TIMEOUT, parity_task, play_parity

    chardet_version = metadata.version("chardet")
    build_record_image(chardet_version)
    steps = play_parity(tools="r2egym", backend="docker", options={}, base_image=RECORD_IMAGE)
    continue_message = no_tool_answer()
    for step in steps:
        if step["kind"] == "no tool call":
            step["observation"] = continue_message
    recording = {
        "source": (
            f"R2E-Gym {R2EGYM_COMMIT}'s own tool scripts (src/r2egym/agenthub/tools: "
            "r2egym/file_editor.py, search.py, r2egym/execute_bash.py, finish.py) called by "
            "SWEEnv(tools='r2egym') on docker, in the test image plus chardet "
            f"{chardet_version}; the no-tool-call answer from R2E-Gym's Observation"
        ),
        "made_by": "python scripts/record_r2e_parity.py R2E_GYM_CHECKOUT [OUT]",
        "task_id": parity_task().task_id,
        "step_timeout": STEP_TIMEOUT,
        "chardet": chardet_version,
        "steps": steps,
    }
    Path(out).write_text(
        json.dumps(recording, indent=1, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    print(f"recorded {len(steps)} steps to {out}")


if __name__ == "__main__":
    main(*sys.argv[1:])
