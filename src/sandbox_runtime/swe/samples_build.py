"""Generate the bundled samples' rows, the way the benchmarks build theirs: by running tests.

For each sample the tests are run in a ``local`` sandbox on the buggy commit and on the
fixed one; FAIL_TO_PASS, PASS_TO_PASS and ``expected_output_json`` come from those runs, not
from hand-written lists.  ``python -m sandbox_runtime.swe.samples_build`` rewrites
``bundled/r2e.jsonl`` and ``bundled/swebench.jsonl``; a test checks that the committed files
equal a fresh generation, so the rows cannot drift from the sample sources.  It needs pytest
on the host (the rows record pytest's ids and output).

Where a published field cannot mean anything for a sample, the choice is stated here:

* R2E-Gym ``modified_entity_summaries`` is empty (R2E-Gym fills it from an AST pass over the
  commit that we do not reproduce); ``num_non_test_func_methods`` counts the distinct
  functions named in the fix's hunk headers; ``prompt`` (the prompt R2E-Gym used to write
  the issue with an LLM) is empty, since our issues are written by hand.
* ``execution_result_content`` follows R2E-Gym's ``ExecutionResult`` model, with the short
  test summaries of the two runs (full logs name host paths and timings, which would make
  the rows differ from machine to machine) and setup fields describing a setup that did
  nothing.
* SWE-bench ``docker_image`` is R2E-Gym's extension of SWE-bench rows; it names the sample's
  locally built image.  ``hints_text`` is empty and ``environment_setup_commit`` is the
  base commit (the environment needs no other).
"""

from __future__ import annotations

import json
import os
import re
import sys
import tempfile
from datetime import datetime
from pathlib import Path
from typing import Any

from sandbox_runtime._core.runtime import SandboxRuntime
from sandbox_runtime.swe.commit import FileDiff, is_r2e_test_path, parse_unified_diff
from sandbox_runtime.swe.parsers import parse_pytest, parse_pytest_r2e
from sandbox_runtime.swe.samples import (
    Sample,
    bundled_rows_path,
    git,
    load_sample,
    sample_names,
    template_dir,
    write_repo,
)

__all__ = ["generate", "main", "rows_for"]

_PYTEST = "python -m pytest -rA -p no:cacheprovider"
_DEF = re.compile(r"^(?:async\s+)?(?:def|class)\s+(\w+)")


def _fixed_commit(sample: Sample) -> tuple[str, str]:
    """Commit the fix and the tests on top of the base; returns (base, new) hashes."""
    with tempfile.TemporaryDirectory(prefix="sandbox-runtime-sample-") as tmp:
        work = Path(tmp)
        base = write_repo(sample, work)
        git(work, "apply", "-", stdin=sample.fix_patch + sample.tests_patch)
        git(work, "add", "-A")
        git(work, "commit", "-q", "-m", f"{sample.name}: {sample.title}")
        return base, git(work, "rev-parse", "HEAD").strip()


def _run(sample: Sample, *, fixed: bool, command: str) -> tuple[int, str]:
    # No namespaces: the sample's tests run with this interpreter's pytest (found on PATH).
    with SandboxRuntime(
        backend="local",
        image=str(template_dir(sample.name)),
        workdir="/testbed",
        options={"isolation": "none"},
    ) as sandbox:
        for patch in (sample.tests_patch, sample.fix_patch if fixed else ""):
            if patch and not sandbox.apply_patch(patch):
                raise RuntimeError(f"{sample.name}: a sample patch does not apply")
        # This interpreter first on PATH: it is the one known to have pytest.
        path = f"{os.path.dirname(sys.executable)}:{os.environ.get('PATH', '')}"
        env = {"PYTHONDONTWRITEBYTECODE": "1", "PATH": path}
        result = sandbox.exec(command, timeout=300, env=env)
        return result.exit_code, result.output


def rows_for(sample: Sample) -> tuple[dict[str, Any], dict[str, Any]]:
    """The sample's (R2E-Gym row, SWE-bench row)."""
    base, new = _fixed_commit(sample)
    f2p, p2p = _fail_and_pass_to_pass(sample)
    return _r2e_row(sample, base, new), _swebench_row(sample, base, f2p, p2p)


def _fail_and_pass_to_pass(sample: Sample) -> tuple[list[str], list[str]]:
    """SWE-bench's FAIL_TO_PASS and PASS_TO_PASS, from pytest on the buggy and fixed trees."""
    test_files = " ".join(sorted({*_patch_paths(sample.tests_patch)}))
    _, before_out = _run(sample, fixed=False, command=f"{_PYTEST} {test_files}")
    _, after_out = _run(sample, fixed=True, command=f"{_PYTEST} {test_files}")
    before, after = parse_pytest(before_out), parse_pytest(after_out)
    f2p = sorted(t for t, s in after.items() if s == "PASSED" and before.get(t) != "PASSED")
    p2p = sorted(t for t, s in after.items() if s == "PASSED" and before.get(t) == "PASSED")
    if not f2p or any(s != "PASSED" for s in after.values()):
        raise RuntimeError(f"{sample.name}: the fix must make every test pass and some newly")
    return f2p, p2p


def _r2e_row(sample: Sample, base: str, new: str) -> dict[str, Any]:
    """The R2E-Gym row, from its held-out tests run on the buggy and the fixed tree."""
    r2e_command = "rm -rf r2e_tests && ln -s ../r2e_tests r2e_tests && bash run_tests.sh"
    old_code, old_out = _run(sample, fixed=False, command=r2e_command)
    new_code, new_out = _run(sample, fixed=True, command=r2e_command)
    expected = parse_pytest_r2e(new_out)
    if parse_pytest_r2e(old_out) == expected:
        raise RuntimeError(f"{sample.name}: the held-out tests do not tell the fix apart")

    parsed = parse_unified_diff(
        sample.fix_patch + sample.tests_patch,
        old_commit_hash=base,
        new_commit_hash=new,
        commit_message=f"{sample.name}: {sample.title}",
        commit_date=datetime.fromisoformat("2026-11-22T00:00:00+00:00"),
    )
    code_diffs = [d for d in parsed.file_diffs if not is_r2e_test_path(d.path)]
    execution = {
        "repo_name": sample.name,
        "new_commit_hash": new,
        "test_file_codes": [],
        "test_file_names": [],
        "setup_res_code": 0,
        "setup_res_stdout": "",
        "setup_res_stderr": "",
        "new_commit_res_code": new_code,
        "new_commit_res_stdout": _summary(new_out),
        "new_commit_res_stderr": "",
        "old_commit_res_code": old_code,
        "old_commit_res_stdout": _summary(old_out),
        "old_commit_res_stderr": "",
    }
    return {
        "repo_name": sample.name,
        "docker_image": sample.image,
        "commit_hash": new,
        "parsed_commit_content": parsed.model_dump_json(),
        "execution_result_content": json.dumps(execution),
        "modified_files": parsed.files,
        "modified_entity_summaries": [],
        "relevant_files": [d.path for d in code_diffs],
        "num_non_test_files": len(code_diffs),
        "num_non_test_func_methods": len(_functions(code_diffs)),
        "num_non_test_lines": _edited_lines(code_diffs),
        "prompt": "",
        "problem_statement": f"[ISSUE]\n{sample.problem_statement.strip()}\n[/ISSUE]",
        "expected_output_json": json.dumps(expected),
    }


def _functions(diffs: list[FileDiff]) -> set[str]:
    """The distinct functions named in the hunk headers of ``diffs``."""
    return {
        m.group(1)
        for d in diffs
        for h in d.hunks
        if (m := _DEF.match(h.descriptor.section.strip()))
    }


def _edited_lines(diffs: list[FileDiff]) -> int:
    """Lines added or deleted by ``diffs``."""
    return sum(
        1
        for d in diffs
        for h in d.hunks
        for ln in h.line_group.all_lines
        if ln.type in ("added", "deleted")
    )


def _swebench_row(sample: Sample, base: str, f2p: list[str], p2p: list[str]) -> dict[str, Any]:
    """The SWE-bench row (with R2E-Gym's ``docker_image`` extension)."""
    return {
        "repo": f"sandbox-runtime-samples/{sample.name}",
        "instance_id": f"sandbox-runtime-samples__{sample.name}-1",
        "base_commit": base,
        "patch": sample.fix_patch,
        "test_patch": sample.tests_patch,
        "problem_statement": sample.problem_statement,
        "hints_text": "",
        "created_at": sample.created_at,
        "version": sample.version,
        "FAIL_TO_PASS": json.dumps(f2p),
        "PASS_TO_PASS": json.dumps(p2p),
        "environment_setup_commit": base,
        "docker_image": sample.image,
    }


def _summary(output: str) -> str:
    """The run's pytest short summary only: the rest names host paths and timings."""
    tail = output.split("short test summary info", 1)[-1]
    # Only the outcome and the test id: pytest cuts a failure's message to the terminal's
    # width, so keeping it would make the rows differ from one machine to the next.
    lines = [
        ln.split(" - ", 1)[0]
        for ln in tail.splitlines()
        if ln.startswith(("PASSED ", "FAILED ", "ERROR "))
    ]
    return "=== short test summary info ===\n" + "\n".join(lines) + "\n"


def _patch_paths(patch: str) -> list[str]:
    return [
        line.split(" b/", 1)[1] for line in patch.splitlines() if line.startswith("diff --git ")
    ]


def generate() -> dict[str, str]:
    """The text of ``r2e.jsonl`` and ``swebench.jsonl`` for the current sample sources."""
    r2e_lines, swebench_lines = [], []
    for name in sample_names():
        r2e, swebench = rows_for(load_sample(name))
        r2e_lines.append(json.dumps(r2e, sort_keys=True))
        swebench_lines.append(json.dumps(swebench, sort_keys=True))
    return {"r2e": "\n".join(r2e_lines) + "\n", "swebench": "\n".join(swebench_lines) + "\n"}


def main() -> int:
    """Rewrite the bundled rows (``--check``: only say whether they are current)."""
    texts = generate()
    stale = (
        [s for s, t in texts.items() if bundled_rows_path(s).read_text() != t]
        if all(bundled_rows_path(s).exists() for s in texts)
        else list(texts)
    )
    if "--check" in sys.argv[1:]:
        print("stale: " + ", ".join(stale) if stale else "up to date")
        return 1 if stale else 0
    for shape, text in texts.items():
        bundled_rows_path(shape).write_text(text, encoding="utf-8")
    print(f"wrote {', '.join(str(bundled_rows_path(s)) for s in texts)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
