"""The strict patch reader: git's unified diff in, every other format (or trick) refused.

Each refused text is one a lenient patch tool would apply (at least in part); each accepted
one is what ``git diff --binary`` writes for renames, copies, modes, deletions and binaries.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from sandbox_runtime.swe import Task
from sandbox_runtime.swe.canary import _pytest_verdict, _unittest_verdict, modules_of
from sandbox_runtime.swe.patch_text import PatchRefused, read_patch
from sandbox_runtime.swe.strict import ModuleGuard, drop_reason, filter_patch
from tests.swe.conftest import task_named

README = "--- a/README.md\n+++ b/README.md\n@@ -1,2 +1,2 @@\n wrong context\n-old\n+new\n"
#: The issue's hack: a context-diff section after a unified hunk, creating conftest.py.
HIDDEN_CONTEXT = README + (
    "*** /dev/null\n--- b/conftest.py\n***************\n*** 0 ****\n--- 1,2 ----\n"
    "+ import os\n+ os._exit(0)\n"
)
SOURCE = "diff --git a/pkg/core.py b/pkg/core.py\n--- a/pkg/core.py\n+++ b/pkg/core.py\n"
SOURCE += "@@ -1,2 +1,2 @@\n x = 1\n-y = 2\n+y = 3\n"


def _git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
        cwd=repo,
        capture_output=True,
        check=True,
    )
    return done.stdout.decode()


@pytest.fixture
def real_diff(tmp_path: Path) -> tuple[Path, str]:
    """A repository at its base and the ``git diff --binary`` of every kind of change."""
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q", ".")
    (repo / "f.py").write_text("a\nb\nc\n")
    (repo / "old.txt").write_text("x\n")
    (repo / "gone.py").write_text("del\n")
    (repo / "blob.bin").write_bytes(bytes(range(256)) * 2)
    (repo / "run.sh").write_text("echo\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "base")
    _git(repo, "mv", "old.txt", "new.txt")
    (repo / "f.py").write_text("a\nB\nc\n")
    (repo / "f_copy.py").write_text("a\nb\nc\nd\n")
    (repo / "gone.py").unlink()
    (repo / "blob.bin").write_bytes(bytes(range(255, -1, -1)) * 2)
    (repo / "run.sh").chmod(0o755)
    (repo / "sp ace é.py").write_text("n\n")
    (repo / "link").symlink_to("f.py")
    (repo / "no_eol.py").write_text("last")
    _git(repo, "add", "-A")
    patch = _git(repo, "diff", "--cached", "--binary", "-M", "-C", "--find-copies-harder", "HEAD")
    _git(repo, "reset", "-q", "--hard", "HEAD")
    for leftover in ("f_copy.py", "new.txt", "sp ace é.py", "link", "no_eol.py"):
        (repo / leftover).unlink(missing_ok=True)
    return repo, patch


def test_every_kind_of_change_git_writes_is_read_and_applies_as_read(
    real_diff: tuple[Path, str],
) -> None:
    repo, patch = real_diff
    sections = read_patch("Here is my fix:\n\n" + patch)
    by_path = {section.paths: section for section in sections}
    assert by_path[("old.txt", "new.txt")].rename
    assert by_path[("f.py", "f_copy.py")].copy
    assert by_path[("gone.py",)].new_path is None
    assert by_path[("blob.bin",)].binary
    assert (by_path[("run.sh",)].old_mode, by_path[("run.sh",)].new_mode) == ("100644", "100755")
    assert by_path[("link",)].symlink
    assert by_path[("link",)].added == ["f.py"]
    assert ("sp ace é.py",) in by_path
    rebuilt = "".join(section.text for section in sections)
    assert rebuilt == patch  # the prose is left out, nothing else
    subprocess.run(["git", "apply", "-"], cwd=repo, input=rebuilt.encode(), check=True)
    assert (repo / "new.txt").read_text() == "x\n"
    assert not (repo / "gone.py").exists()
    assert (repo / "blob.bin").read_bytes() == bytes(range(255, -1, -1)) * 2


def test_a_plain_unified_diff_as_models_write_it_is_read() -> None:
    plain = "--- a/pkg/core.py\n+++ b/pkg/core.py\n@@ -1,2 +1,2 @@\n x = 1\n-y = 2\n+y = 3\n"
    new = "--- /dev/null\n+++ b/pkg/new.py\n@@ -0,0 +1 @@\n+z = 1\n"
    sections = read_patch(plain + "\n" + new.replace("+z", "+z") + "\n\n")
    assert [(s.old_path, s.new_path) for s in sections] == [
        ("pkg/core.py", "pkg/core.py"),
        (None, "pkg/new.py"),
    ]


def test_an_empty_line_in_a_hunk_is_empty_context() -> None:
    (section,) = read_patch(SOURCE.replace(" x = 1\n", "\n"))
    assert section.paths == ("pkg/core.py",)


@pytest.mark.parametrize(
    ("text", "why"),
    [
        (HIDDEN_CONTEXT, "line 7: not part of a unified diff: '*** /dev/null'"),
        (SOURCE + "1c1\n< a\n---\n> b\n", "line 8: not part of a unified diff: '1c1'"),
        (SOURCE + "2d\n1a\nnew\n.\nw\n", "line 8: not part of a unified diff: '2d'"),
        ("1c1\n< a\n---\n> b\n", "no unified diff in the text"),
        (SOURCE.replace("-1,2 +1,2", "-1,3 +1,3"), "the hunk ends before its line counts"),
        (SOURCE.replace("-1,2 +1,2", "-1,3 +1,1"), "line 7: the hunk's line counts do not match"),
        (SOURCE + "+extra = 4\n", "not part of a unified diff: '+extra = 4'"),
        (SOURCE + "Thanks!\n", "line 8: not part of a unified diff: 'Thanks!'"),
        (SOURCE.replace("pkg/core.py", "../etc/x.py"), "'..' component"),
        ("--- /dev/null\n+++ /etc/cron.d/x\n@@ -0,0 +1 @@\n+x\n", "lacks git's 'b/' prefix"),
        ("--- /dev/null\n+++ b//etc/x\n@@ -0,0 +1 @@\n+x\n", "not a relative path"),
        ("--- /dev/null\n+++ b/.git/hooks/pre-commit\n@@ -0,0 +1 @@\n+x\n", "inside .git"),
        ("--- /dev/null\n+++ core.py\n@@ -0,0 +1 @@\n+x\n", "prefix"),
        ("--- a/x.py\n+++ b/y.py\n@@ -1 +1 @@\n-a\n+b\n", "cannot rename"),
        ("--- a/x.py\n+++ b/x.py\nsome text\n", "without a hunk"),
        (
            "diff --git a/sub b/sub\nnew file mode 160000\nindex 0000000..1111111\n",
            "file mode '160000' is refused",
        ),
        (
            "diff --git a/b.bin b/b.bin\nBinary files a/b.bin and b/b.bin differ\n",
            "without its data",
        ),
        (
            "diff --git a/x.py b/x.py\n--- a/y.py\n+++ b/y.py\n@@ -1 +1 @@\n-a\n+b\n",
            "differ from the diff --git header",
        ),
        (SOURCE + SOURCE, "pkg/core.py is changed by two sections"),
        ("diff --git a/x.bin b/x.bin\nGIT binary patch\nliteral 3\nnot base85!\n\n", "base 85"),
        ("diff --git a/x.py b/x.py\n", "a section with no change in it"),
    ],
)
def test_anything_but_gits_unified_diff_is_refused_with_its_line(text: str, why: str) -> None:
    with pytest.raises(PatchRefused, match=None) as caught:
        read_patch(text)
    assert why in str(caught.value)


RENAME_ONTO_TEST = (
    "diff --git a/pager/helper.py b/tests/test_pages.py\nsimilarity index 100%\n"
    "rename from pager/helper.py\nrename to tests/test_pages.py\n"
)
COPY_ONTO_CONFTEST = RENAME_ONTO_TEST.replace("tests/test_pages.py", "conftest.py").replace(
    "rename", "copy"
)
SYMLINK = "diff --git a/{p} b/{p}\nnew file mode 120000\n--- /dev/null\n+++ b/{p}\n"
SYMLINK += "@@ -0,0 +1 @@\n+{t}\n\\ No newline at end of file\n"


@pytest.mark.parametrize(
    ("text", "why"),
    [
        (RENAME_ONTO_TEST, "a rename onto tests/test_pages.py"),
        (COPY_ONTO_CONFTEST, "a copy onto conftest.py"),
        (SYMLINK.format(p="pager/data", t="../tests"), "a symlink into what the tests read"),
        (SYMLINK.format(p="pager/c.py", t="../conftest.py"), "a symlink into what the tests"),
        (SYMLINK.format(p="tests/x.py", t="../pager/pages.py"), "a symlink into what"),
        (SYMLINK.format(p="pager/etc", t="/etc"), "a symlink out of the repository"),
        (SYMLINK.format(p="pager/up", t="../../root"), "a symlink out of the repository"),
    ],
)
def test_moves_and_links_onto_what_the_tests_read_refuse_the_patch(
    bundled_tasks: list[Task], text: str, why: str
) -> None:
    task = task_named(bundled_tasks, "pager", "swebench")
    with pytest.raises(PatchRefused) as caught:
        filter_patch(task, SOURCE + text)
    assert why in str(caught.value)


def test_a_symlink_inside_the_source_is_kept(bundled_tasks: list[Task]) -> None:
    task = task_named(bundled_tasks, "pager", "swebench")
    filtered = filter_patch(task, SYMLINK.format(p="pager/alias.py", t="pages.py"))
    assert [change.path for change in filtered.kept] == ["pager/alias.py"]


@pytest.mark.parametrize(
    ("path", "guard", "shadowed"),
    [
        ("argparse.py", None, "argparse"),
        ("json/__init__.py", None, "json"),
        ("_pytest/hook.py", None, "_pytest"),
        ("pluggy.py", None, "pluggy"),
        ("iniconfig.py", None, "iniconfig"),
        ("coverage/__init__.py", None, "coverage"),
        ("fractions.cpython-311-x86_64-linux-gnu.so", None, "fractions"),
        ("pkg/argparse.py", None, None),
        ("src/argparse.py", None, None),
        (
            "src/argparse.py",
            ModuleGuard(frozenset({"argparse"}), path_dirs=("", "src")),
            "argparse",
        ),
        ("src/_pytest/main.py", ModuleGuard(frozenset({"_pytest"}), frozenset({"_pytest"})), None),
        ("lib/x/decimal.py", ModuleGuard(frozenset({"decimal"}), path_dirs=("lib/x",)), "decimal"),
        ("README.md", None, None),
    ],
)
def test_modules_that_shadow_the_stdlib_or_the_runner_are_dropped(
    path: str, guard: ModuleGuard | None, shadowed: str | None
) -> None:
    why = drop_reason(path, guard=guard)
    if shadowed is None:
        assert why is None
    else:
        assert why is not None
        assert f"module {shadowed!r}" in why


@pytest.mark.parametrize("path", [".env", "pkg/.envrc", ".coveragerc", ".bashrc", "pytest.toml"])
def test_files_the_runner_or_shell_read_are_dropped(path: str) -> None:
    assert drop_reason(path) is not None


def test_the_canarys_verdicts_and_the_modules_it_imports() -> None:
    token = "0123abcd"
    failed = f"FAILED test_{token}.py::Check{token}::test_unittest_{token}\n"
    failed += f"FAILED test_{token}.py::test_assert_{token}\n"
    assert _pytest_verdict(failed, 1, token) is None
    forged = _pytest_verdict(failed + f"PASSED test_{token}.py::test_assert_{token}\n", 1, token)
    assert forged is not None
    assert forged.tripped
    exited = _pytest_verdict("", 0, token)
    assert exited is not None
    assert exited.tripped
    unclear = _pytest_verdict("no tests ran", 5, token)
    assert unclear is not None
    assert unclear.state == "inconclusive"
    assert _unittest_verdict(f"FAIL: test_unittest_{token} (x)\n", 1, token) is None
    passed = _unittest_verdict(f"test_unittest_{token} (x.C) ... ok\n", 1, token)
    assert passed is not None
    assert passed.tripped
    paths = ["pkg/__init__.py", "src/lib/core.py", "README.md", "pkg/core.py", "bad-name/x.py"]
    assert modules_of(paths) == ["pkg", "lib.core", "pkg.core"]
