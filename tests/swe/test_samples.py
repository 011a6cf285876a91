from __future__ import annotations

import subprocess

import pytest

from sandbox_runtime.swe import samples_build
from sandbox_runtime.swe.samples import bundled_rows_path, load_sample, sample_names, template_dir


def test_at_least_five_samples_with_distinct_bugs() -> None:
    names = sample_names()
    assert len(names) >= 5
    for name in names:
        sample = load_sample(name)
        assert sample.fix_patch.startswith("diff --git")
        assert sample.tests_patch.startswith("diff --git")
        assert "/tests/" not in sample.fix_patch
        assert "tests/" in sample.tests_patch


def test_template_mirrors_an_r2e_gym_image() -> None:
    root = template_dir("pager")
    assert (root / "testbed" / "run_tests.sh").is_file()
    assert (root / "r2e_tests" / "test_1.py").is_file()
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"],
        cwd=root / "testbed",
        capture_output=True,
        text=True,
        check=True,
    )
    row = next(r for r in bundled_rows_path("swebench").read_text().splitlines() if "pager" in r)
    assert head.stdout.strip() in row  # the commit every machine builds is the row's base_commit
    assert template_dir("pager") == root  # cached


@pytest.mark.slow
def test_bundled_rows_are_generated_from_the_sources() -> None:
    generated = samples_build.generate()
    for shape, text in generated.items():
        assert bundled_rows_path(shape).read_text() == text, (
            f"run python -m {samples_build.__name__}"
        )
