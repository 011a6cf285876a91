"""The verl agent-loop file the package ships, without verl (the main suite's venv).

verl's ``AgentLoopWorker`` reads ``agent_loop_config_path`` with OmegaConf and instantiates
each entry's ``_target_`` with Hydra; tests/verl/test_agent_loop.py does that with verl.  Here:
the one-line override's command prints the file, the file names the class by a path that
exists, and the package itself does not import verl.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import yaml  # type: ignore[import-untyped,unused-ignore]

import sandbox_runtime.integrations.verl as package
from sandbox_runtime.integrations.verl import AGENT_LOOP_CONFIG, AGENT_LOOP_NAME


def test_the_override_command_prints_the_shipped_file() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "sandbox_runtime.integrations.verl"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    path = Path(done.stdout.strip())
    assert path == AGENT_LOOP_CONFIG
    assert path.is_file()


def test_the_file_registers_the_loop_by_name_and_target() -> None:
    entries = yaml.safe_load(AGENT_LOOP_CONFIG.read_text("utf-8"))
    [entry] = entries
    assert entry["name"] == AGENT_LOOP_NAME
    module, _, cls = entry["_target_"].rpartition(".")
    source = Path(package.__file__).with_name(module.rpartition(".")[2] + ".py")
    tree = ast.parse(source.read_text("utf-8"))
    assert cls in {node.name for node in tree.body if isinstance(node, ast.ClassDef)}
    assert entry["on_fault"] == "mask"


def test_the_package_does_not_import_verl() -> None:
    code = "import sys, sandbox_runtime.integrations.verl; print('verl' in sys.modules)"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.strip() == "False"
