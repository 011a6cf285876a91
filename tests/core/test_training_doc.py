"""Every command of docs/training.md runs in CI on a CPU, or says why it cannot.

A command (a line of a ``bash`` block, split at ``&&``) passes when it carries ``# GPU-only`` or
``# off-CI: <why>`` (GitHub, the hub, cloud credentials), or when CI runs it verbatim: a line of
``scripts/check-stacks.sh`` (the stacks' install commands, resolved with ``--dry-run``), a
command this file runs itself (the data steps, on the bundled rows), or the CPU smoke that
``tests/verl/test_train_smoke.py`` runs.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from sandbox_runtime.swe.dataset import load_rows

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "training.md"
BASH = re.compile(r"^```bash\n(.*?)^```", re.DOTALL | re.MULTILINE)
MARKED = re.compile(r"#\s*(GPU-only|off-CI:)")
#: Shell steps that change the shell, not the machine.
SHELL = ("cd ", ". ", "source ", "export ")
#: The Graph Planner JSONL file the clone ships (seed 003's format), and the row it names.
GRAPH_PLANNER = "examples/train/graphplanner/graphplanner.jsonl"
#: Run by this file as written, in a scratch directory that sees the clone's ``examples``.
DATA_STEPS = (
    "sandbox-runtime tasks rllm bundled:r2e --out data --split train --sort-by-image",
    f"sandbox-runtime tasks rllm {GRAPH_PLANNER} --out data-gp --split train --prompt patch",
    "sandbox-runtime tasks list data/train_verl.parquet",
)
#: The CPU part of the GPU smoke, run by tests/verl/test_train_smoke.py (with --steps 3).
SMOKE = "python examples/train/gpu_smoke.py --out /tmp/smoke --cpu"


def _commands() -> list[str]:
    commands = []
    for block in BASH.findall(DOC.read_text("utf-8")):
        for line in block.splitlines():
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            code, _, comment = line.partition(" #")
            if MARKED.search("#" + comment):
                continue
            commands += [part.strip() for part in code.split("&&") if part.strip()]
    return commands


def _run_in_ci(command: str) -> bool:
    if command.startswith(SHELL) or command in DATA_STEPS:
        return True
    if command == SMOKE:
        smoke_test = (ROOT / "tests" / "verl" / "test_train_smoke.py").read_text("utf-8")
        return "gpu_smoke.py" in smoke_test and '"--cpu"' in smoke_test
    checked = (ROOT / "scripts" / "check-stacks.sh").read_text("utf-8")
    return any(command in line for line in checked.splitlines() if not line.startswith("#"))


def test_the_doc_has_commands_for_both_stacks() -> None:
    commands = _commands()
    assert any("requirements/stack-seeds.txt" in c for c in commands), commands
    assert any("requirements/stack-main.txt" in c for c in commands), commands
    assert any("requirements/stack-main-verl08.txt" in c for c in commands), commands


def test_every_command_runs_in_ci_or_is_marked() -> None:
    loose = [command for command in _commands() if not _run_in_ci(command)]
    assert not loose, f"neither run in CI nor marked GPU-only / off-CI: {loose}"


def test_check_stacks_is_run_by_the_test_command() -> None:
    assert "scripts/check-stacks.sh" in (ROOT / "scripts" / "test.sh").read_text("utf-8")
    assert "scripts/test.sh" in (ROOT / ".ci" / "run").read_text("utf-8")


def test_the_shipped_graph_planner_file_names_the_bundled_row() -> None:
    """The shipped file's row is the bundled pager row, so the step reads a current task."""
    [pager] = [row for row in load_rows("bundled:r2e") if row["repo_name"] == "pager"]
    entry = json.loads((ROOT / GRAPH_PLANNER).read_text("utf-8"))
    shipped = (ROOT / GRAPH_PLANNER).parent / entry["sandbox"]["r2e_ds_json"]
    assert json.loads(shipped.read_text("utf-8")) == pager


def test_the_data_steps_run_as_written(tmp_path: Path) -> None:
    assert all(step in DOC.read_text("utf-8") for step in DATA_STEPS)
    # A fresh clone's files, nothing written beside them: the steps' outputs go to tmp_path.
    (tmp_path / "examples").symlink_to(ROOT / "examples", target_is_directory=True)
    outputs = []
    for step in DATA_STEPS:
        argv = [sys.executable, "-m", "sandbox_runtime.cli", *step.split()[1:]]
        done = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, check=False)
        assert done.returncode == 0, (step, done.stderr)
        outputs.append(done.stdout + done.stderr)
    assert (tmp_path / "data" / "train.parquet").is_file()
    assert (tmp_path / "data-gp" / "train_verl.parquet").is_file()
    assert "5 task(s), 0 bad row(s)" in outputs[2]
    argv = [sys.executable, "-m", "sandbox_runtime.cli", "tasks", "list"]
    planner = subprocess.run(
        [*argv, "data-gp/train_verl.parquet"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert planner.returncode == 0, planner.stderr
    assert "planner-pager" in planner.stdout


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("uv pip install -r requirements/stack-seeds.txt '.[all]'", True),
        ("bash examples/train/run_ags.sh   # GPU-only: 8 GPUs", True),
        ("pip install 'verl[vllm]'", False),
    ],
)
def test_the_classification_itself(line: str, expected: bool) -> None:
    code, _, comment = line.partition(" #")
    assert (bool(MARKED.search("#" + comment)) or _run_in_ci(code.strip())) is expected


def _pins(path: Path) -> dict[str, str]:
    """``name==version`` lines of a requirements file and those it includes with ``-r``."""
    found: dict[str, str] = {}
    for line in path.read_text("utf-8").splitlines():
        if line.startswith("-r "):
            found |= _pins(path.parent / line[3:].strip())
        name, sep, version = line.split("#")[0].strip().partition("==")
        if sep and " " not in name and "@" not in name:
            found[name.lower().replace("_", "-")] = version.strip()
    return found


@pytest.mark.parametrize("stack", ["stack-seeds", "stack-main", "stack-main-verl08"])
def test_each_lock_holds_its_input_s_pins(stack: str) -> None:
    """A lock written before its input changed would install other versions than it says."""
    requirements = ROOT / "requirements"
    wanted = _pins(requirements / f"{stack}.in")
    locked = _pins(requirements / f"{stack}.txt")
    assert wanted, stack
    assert {name: locked.get(name) for name in wanted} == wanted
    assert "sandbox-runtime-swe" not in locked  # installed from the clone
    assert "rllm" not in locked  # installed --no-deps from its checkout
