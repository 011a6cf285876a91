"""The built-in R2E-style tools answer the parity suite as R2E-Gym 0d94c4e's scripts did.

``tests/fixtures/r2egym_parity.json`` is what R2E-Gym's own ``execute_bash``, ``file_editor``
and ``search`` scripts answered to the cases of :mod:`tests.integrations.r2e_parity` on
docker (``scripts/record_r2e_parity.py`` re-records it from an R2E-Gym checkout).  The
built-in tools play the same actions on docker and on local (namespace), and every answer
must be the recorded one, byte for byte, with one normalisation: where a command prints bytes
that are not UTF-8, R2E-Gym's script dies decoding them and the observation is a Python
traceback whose frames name the interpreter's files and line numbers (``subprocess.py`` of
the image's Python); there the status line and the traceback's last line (the
``UnicodeDecodeError`` with its byte and position) must match, the frames are not compared.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import bwrap_problem, docker_problem, require
from tests.integrations.r2e_parity import STEP_TIMEOUT, parity_actions, play_parity

RECORDING = Path(__file__).parent.parent / "fixtures" / "r2egym_parity.json"


def _recorded() -> dict[str, Any]:
    recording: dict[str, Any] = json.loads(RECORDING.read_text(encoding="utf-8"))
    return recording


def _normalised(observation: str) -> str:
    """A traceback observation as its status line and its error line; others as they are."""
    if "\nTraceback (most recent call last):\n" not in observation:
        return observation
    lines = observation.rstrip("\n").split("\n")
    return "\n".join([lines[0], lines[1], "<frames>", lines[-1]])


def _mismatches(played: list[dict[str, str]]) -> list[str]:
    recorded = _recorded()["steps"]
    differing = []
    for mine, theirs in zip(played, recorded, strict=True):
        assert mine["action"] == theirs["action"], theirs["kind"]
        if _normalised(mine["observation"]) != _normalised(theirs["observation"]):
            differing.append(
                f"{theirs['kind']}:\n ours      {mine['observation']!r}\n"
                f" R2E-Gym's {theirs['observation']!r}"
            )
    return differing


def test_the_recording_is_of_r2e_gym_0d94c4e_and_of_todays_cases() -> None:
    recording = _recorded()
    assert "R2E-Gym 0d94c4e" in recording["source"]
    assert recording["step_timeout"] == STEP_TIMEOUT
    assert [(s["kind"], s["action"]) for s in recording["steps"]] == parity_actions()
    cases = [s for s in recording["steps"] if s["kind"] not in ("setup", "cleanup")]
    assert len(cases) >= 50
    tracebacks = [s["kind"] for s in cases if "Traceback" in s["observation"]]
    assert tracebacks == [
        "invalid utf-8 output",
        "binary output",
        "latin-1 output",
        "invalid utf-8 stderr failing",
    ]


@pytest.mark.parametrize("backend", ["docker", "local"])
def test_builtin_tools_answer_every_case_as_r2e_gym(backend: str) -> None:
    if backend == "docker":
        require(docker_problem())
        played = play_parity(tools="builtin", backend="docker", options={})
    else:
        require(bwrap_problem())
        played = play_parity(tools="builtin")
    differing = _mismatches(played)
    assert not differing, f"{len(differing)} cases differ:\n" + "\n".join(differing)


@pytest.mark.skipif(
    not os.environ.get("SANDBOX_RUNTIME_R2EGYM_SRC"),
    reason="R2E-Gym's src (SANDBOX_RUNTIME_R2EGYM_SRC) is needed to check the recording live",
)
def test_the_recording_is_what_r2e_gyms_own_scripts_answer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Live: R2E-Gym's scripts (its checkout's ``src``) answer the recording again, on docker."""
    require(docker_problem())
    spec = importlib.util.spec_from_file_location(
        "record_r2e_parity", Path(__file__).parents[2] / "scripts" / "record_r2e_parity.py"
    )
    assert spec is not None
    assert spec.loader is not None
    recorder = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(recorder)
    monkeypatch.syspath_prepend(os.environ["SANDBOX_RUNTIME_R2EGYM_SRC"])
    try:
        recorder.build_record_image(_recorded()["chardet"])
        played = play_parity(
            tools="r2egym", backend="docker", options={}, base_image=recorder.RECORD_IMAGE
        )
        for step in played:
            if step["kind"] == "no tool call":
                step["observation"] = recorder.no_tool_answer()
        assert not _mismatches(played)
    finally:
        for name in [m for m in sys.modules if m == "r2egym" or m.startswith("r2egym.")]:
            del sys.modules[name]
