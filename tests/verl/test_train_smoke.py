"""The CPU part of examples/train/gpu_smoke.py: sandbox rewards through verl drive updates."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "train" / "gpu_smoke.py"


def test_cpu_part_of_the_training_smoke(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(EXAMPLE), "--out", str(tmp_path), "--cpu", "--steps", "3"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    # Gold diffs earn 1 and the random model's text 0, each graded in its own sandbox.
    assert result["rewards"] == [[0.0, 0.0, 1.0], [0.0, 0.0, 1.0]]
    assert result["rewarded_logprob_after"] > result["rewarded_logprob_before"]
    assert (tmp_path / "model" / "config.json").is_file()
    assert (tmp_path / "data" / "train_verl.parquet").is_file()
