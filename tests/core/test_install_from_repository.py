"""No doc or example installs this project from a package index.

PyPI's ``sandbox-runtime`` is another project (Anthropic's process sandbox) with the same import
package, and this project's distribution, ``sandbox-runtime-swe``, is not on any index: a doc
line ``pip install 'sandbox-runtime[all]'`` installs the wrong thing, and one naming
``sandbox-runtime-swe`` alone fails.  Docs install from a clone (a path) or a VCS URL.  The
library's own error hints may name ``sandbox-runtime-swe[extra]``: they are shown only where the
distribution is installed, and there pip takes the installed one and fetches the extra's
dependencies alone.
"""

from __future__ import annotations

import re
import shlex
import sys
from pathlib import Path

import pytest
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib  # type: ignore[import-not-found,unused-ignore]

ROOT = Path(__file__).resolve().parents[2]
DISTRIBUTION = "sandbox-runtime-swe"
#: Ours, the other project's, and the emulators: none of them is installed from an index.
OURS = {
    canonicalize_name(n) for n in (DISTRIBUTION, "sandbox-runtime", "sandbox-runtime-emulators")
}
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.DOTALL | re.MULTILINE)
INSTALL = re.compile(r"\b(?:uv )?pip3? install\b(.*)")


def _documents() -> list[Path]:
    docs = [ROOT / "README.md", ROOT / "CHANGELOG.md", ROOT / "emulators" / "README.md"]
    docs += sorted((ROOT / "docs").glob("*.md"))
    return docs


def _scripts() -> list[Path]:
    found = sorted((ROOT / "examples").rglob("*.sh")) + sorted((ROOT / "examples").rglob("*.py"))
    return found + sorted((ROOT / "scripts").glob("*.sh")) + [ROOT / ".ci" / "run"]


def _code_lines(path: Path) -> list[str]:
    """The lines a reader would run: fenced blocks of a document, every line of a script."""
    text = path.read_text("utf-8")
    if path.suffix != ".md":
        return text.splitlines()
    return [line for _lang, block in FENCE.findall(text) for line in block.splitlines()]


def _from_an_index(line: str) -> list[str]:
    """The arguments of a ``pip install`` on ``line`` that fetch one of ours from an index."""
    found = INSTALL.search(line.split(" #")[0])
    if not found:
        return []
    try:
        words = shlex.split(found.group(1))
    except ValueError:
        words = found.group(1).split()
    bad = []
    for word in words:
        if word.startswith(("-", ".", "/", "~", "$")):
            continue
        try:
            requirement = Requirement(word)
        except InvalidRequirement:
            continue
        if canonicalize_name(requirement.name) in OURS and not requirement.url:
            bad.append(word)
    return bad


@pytest.mark.parametrize("path", _documents() + _scripts(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_doc_or_example_installs_this_project_from_an_index(path: Path) -> None:
    bad = [
        f"{path.relative_to(ROOT)}: {line.strip()}"
        for line in _code_lines(path)
        if _from_an_index(line)
    ]
    assert not bad, bad


def test_the_check_itself_catches_an_index_install() -> None:
    assert _from_an_index("pip install 'sandbox-runtime[all]' 'swebench==3.0.2'")
    assert _from_an_index("uv pip install sandbox-runtime-swe")
    assert not _from_an_index("pip install './sandbox-runtime[all]'")
    assert not _from_an_index("pip install '.[all]' -e ./emulators")
    assert not _from_an_index(
        "pip install 'sandbox-runtime-swe[all] @ git+https://example.org/sandbox-runtime'"
    )


def test_the_library_s_hints_name_this_distribution_never_the_other_project() -> None:
    """An install hint of ``sandbox-runtime[...]`` would fetch Anthropic's package."""
    wrong = re.compile(r"pip install '?sandbox-runtime(\[|'|\s|$|\")")
    found = [
        f"{path.relative_to(ROOT)}:{number}"
        for tree in ("src", "emulators/src", "benchmarks")
        for path in sorted((ROOT / tree).rglob("*.py"))
        for number, line in enumerate(path.read_text("utf-8").splitlines(), 1)
        if wrong.search(line)
    ]
    assert not found, found


def test_the_distribution_and_the_emulators_pin_use_this_name() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"]
    assert project["name"] == DISTRIBUTION
    assert project["scripts"] == {"sandbox-runtime": "sandbox_runtime.cli:main"}
    for extra in project["optional-dependencies"].values():
        for text in extra:
            requirement = Requirement(text)
            assert canonicalize_name(requirement.name) != "sandbox-runtime", text
    emulators = tomllib.loads((ROOT / "emulators" / "pyproject.toml").read_text("utf-8"))
    names = {Requirement(t).name for t in emulators["project"]["dependencies"]}
    assert DISTRIBUTION in names
    assert "sandbox-runtime" not in names
