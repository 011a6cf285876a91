"""The search tool, answering as R2E-Gym's ``search`` answers, byte for byte.

In one file: ``grep -n TERM FILE`` (a basic regular expression, as R2E-Gym runs it) under a
``Matches for "TERM" in FILE:`` header.  Under a directory: every non-hidden ``.py`` file,
how many of its lines hold the term (plain text), listed in the order Python's ``os.walk``
visits them (a directory's own files first, then its subdirectories, each in the order the
file system returns them) as ``./``-paths relative to the repository, between ``Found N
matches`` and ``End of matches`` lines; more than 100 files is refused.  Paths in headers are
absolute, as R2E-Gym's ``realpath`` makes them (symlinks in the path itself are not resolved).

The walk is one ``find`` whose ``grep -c`` counts each file, run inside the directory so it
reads the sandbox's files on every backend; the walk order is rebuilt from ``find``'s
depth-first order, which lists each directory's entries in the file system's order too.
"""

from __future__ import annotations

import posixpath
import shlex
from typing import NamedTuple

from sandbox_runtime._core.runtime import SandboxRuntime
from sandbox_runtime.swe.agents.sandbox_paths import path_kind, run_helper

__all__ = ["SearchAnswer", "search"]

_MAX_FILES = 100


class SearchAnswer(NamedTuple):
    """What the search printed, and whether it reports an error."""

    text: str
    error: bool = False


def search(sandbox: SandboxRuntime, term: str, path: str, *, timeout: float) -> SearchAnswer:
    """Search ``path`` (a file or a directory, relative to the workdir) for ``term``."""
    real = sandbox.resolve(path)
    kind = path_kind(sandbox, path)
    if kind == "file":
        return _in_file(sandbox, term, real, timeout)
    if kind != "dir":
        return SearchAnswer(f"Directory '{real}' not found or not a directory.\n", error=True)
    return _in_directory(sandbox, term, real, timeout)


def _in_file(sandbox: SandboxRuntime, term: str, real: str, timeout: float) -> SearchAnswer:
    folder, name = posixpath.split(real)
    result = run_helper(
        sandbox,
        f"grep -n {shlex.quote(term)} {shlex.quote(name)}",
        cwd=folder or "/",
        programs=("grep",),
        timeout=timeout,
    )
    if result.timed_out:
        return SearchAnswer(f"Error executing grep:\ntimed out after {timeout:g}s\n", error=True)
    if result.exit_code == 1:
        return SearchAnswer(f'No matches found for "{term}" in {real}\n')
    if result.exit_code != 0:
        return SearchAnswer(f"Error executing grep:\n{result.stderr}\n", error=True)
    return SearchAnswer(f'Matches for "{term}" in {real}:\n{result.stdout.strip()}\n')


def _in_directory(sandbox: SandboxRuntime, term: str, real: str, timeout: float) -> SearchAnswer:
    # ``find -exec`` reports a missing grep as its own failure: the shell's 127 says it.
    command = (
        "command -v grep >/dev/null || exit 127; "
        "LC_ALL=C find . -mindepth 1 -name '.*' -prune -o -name '*.py' ! -xtype d "
        f"-exec grep -caHF -e {shlex.quote(term)} {{}} +"
    )
    result = run_helper(sandbox, command, cwd=real, programs=("find", "grep"), timeout=timeout)
    if result.timed_out:
        return SearchAnswer(f"error: the search timed out after {timeout:g}s\n", error=True)
    counts: dict[str, int] = {}
    for line in result.stdout.splitlines():
        name, _, count = line.rpartition(":")
        if name and count.isdigit():
            counts[name] = int(count)
    matched = [(name, counts[name]) for name in _walk_order(list(counts)) if counts[name] > 0]
    if not matched:
        return SearchAnswer(f'No matches found for "{term}" in {real}\n')
    if len(matched) > _MAX_FILES:
        return SearchAnswer(
            f'More than {len(matched)} files matched for "{term}" in {real}. '
            "Please narrow your search.\n"
        )
    listing = "".join(
        f"{_shown(sandbox, real, name)} ({count} matches)\n" for name, count in matched
    )
    total = sum(count for _, count in matched)
    return SearchAnswer(
        f'Found {total} matches for "{term}" in {real}:\n{listing}'
        f'End of matches for "{term}" in {real}\n'
    )


def _shown(sandbox: SandboxRuntime, real: str, found: str) -> str:
    """A file as R2E-Gym lists it: relative to the workdir, always starting ``./``."""
    relative = posixpath.relpath(posixpath.join(real, found), sandbox.workdir)
    return relative if relative.startswith("./") else f"./{relative}"


class _Folder:
    """A directory of the walk: its files and subdirectories in the order first seen."""

    def __init__(self) -> None:
        self.files: list[str] = []
        self.folders: dict[str, _Folder] = {}


def _walk_order(found: list[str]) -> list[str]:
    """``found`` (``./a/b.py`` in depth-first order) in ``os.walk``'s top-down order."""
    root = _Folder()
    for name in found:
        folder = root
        parts = name.removeprefix("./").split("/")
        for part in parts[:-1]:
            folder = folder.folders.setdefault(part, _Folder())
        folder.files.append(name)
    ordered: list[str] = []
    pending = [root]
    while pending:
        folder = pending.pop()
        ordered += folder.files
        pending += reversed(folder.folders.values())
    return ordered
