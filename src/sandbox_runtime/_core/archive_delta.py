"""A rollback that rewrites only what changed: the plan of an archive checkpoint's delta restore.

A whole-tree restore writes every file of the checkpoint again, which costs what a copy of
the tree costs.  After an agent's episode usually a few files differ, so the store first
asks the sandbox for the state of the captured directories (one command: GNU ``find``'s
type, mode, owner, path and link target of each entry, then ``sha256sum`` of each file) and
compares it, on the host, with the archive's members: an entry whose type, mode, owner and
content (SHA-256 of a file, target of a symlink) match is left alone; an entry the archive
lacks is removed; the rest is removed where its type changed and extracted from a smaller
archive.  Contents are compared by hash, never by size or time, which a command in the
sandbox can set: a file changed back to the same size and time is still found.

Where the sandbox lacks the tools (``find -printf`` or ``sha256sum -z``: busybox), or the
archive holds what the comparison does not cover (hard links, devices, fifos), the plan is
``None`` and the store restores the whole tree.
"""

from __future__ import annotations

import hashlib
import io
import tarfile
from collections.abc import Sequence
from dataclasses import dataclass, field

__all__ = ["NO_TOOLS_EXIT", "STATE_SCRIPT", "DeltaPlan", "archive_state", "plan", "sandbox_state"]

#: The state command's exit code when the sandbox lacks GNU find or ``sha256sum -z``.
NO_TOOLS_EXIT = 45
_SENTINEL = "=SHA="

#: Arguments: the captured directories.  Output: six NUL-ended fields per entry (type, octal
#: mode, uid, gid, path, link target), the sentinel, then ``sha256sum -z`` lines.
STATE_SCRIPT = f"""
find / -maxdepth 0 -printf '' 2>/dev/null || exit {NO_TOOLS_EXIT}
printf '' | sha256sum -z >/dev/null 2>&1 || exit {NO_TOOLS_EXIT}
for p; do [ -e "$p" ] && find "$p" -printf '%y\\0%m\\0%U\\0%G\\0%p\\0%l\\0'; done
printf '{_SENTINEL}\\0'
for p; do [ -e "$p" ] && find "$p" -type f -exec sha256sum -z -- {{}} +; done
exit 0
"""

#: One entry's state: type (``d``, ``f``, ``l``), permission bits, uid, gid, and the
#: file's SHA-256 or the symlink's target ("" for a directory).
State = tuple[str, int, int, int, str]

_TYPES = {tarfile.DIRTYPE: "d", tarfile.REGTYPE: "f", tarfile.AREGTYPE: "f", tarfile.SYMTYPE: "l"}


@dataclass
class DeltaPlan:
    """What a delta restore does: remove, then extract the changed members, then chmod."""

    remove: list[str] = field(default_factory=list)
    extract: set[str] = field(default_factory=set)
    """Archive member names (relative to ``/``) to extract."""
    modes: list[tuple[int, str]] = field(default_factory=list)
    """Directories whose mode differs (an extraction keeps an existing directory's mode)."""


def _under(path: str, roots: Sequence[str]) -> bool:
    return any(path == root or path.startswith(root + "/") for root in roots)


def archive_state(data: bytes, roots: Sequence[str]) -> dict[str, State] | None:
    """The archive's entries under ``roots`` by absolute path; ``None`` if not comparable."""
    found: dict[str, State] = {}
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as archive:
        for member in archive:
            kind = _TYPES.get(member.type)
            path = "/" + member.name
            if kind is None:
                return None  # hard links, devices, fifos: the comparison does not cover them
            if not _under(path, roots):
                continue
            detail = member.linkname if kind == "l" else ""
            if kind == "f":
                stream = archive.extractfile(member)
                detail = hashlib.sha256(stream.read() if stream else b"").hexdigest()
            found[path] = (kind, member.mode & 0o7777, member.uid, member.gid, detail)
    return found


def sandbox_state(output: bytes) -> dict[str, State]:
    """Parse :data:`STATE_SCRIPT`'s output into each entry's state by absolute path."""
    fields = output.decode("utf-8", "surrogateescape").split("\0")
    cut = fields.index(_SENTINEL)
    listing, hashes = fields[:cut], fields[cut + 1 :]
    found: dict[str, State] = {}
    for index in range(0, len(listing) - 5, 6):
        kind, mode, uid, gid, path, target = listing[index : index + 6]
        found[path] = (kind, int(mode, 8), int(uid), int(gid), target if kind == "l" else "")
    for line in hashes:
        digest, _, path = line.partition("  ")
        known = found.get(path)
        if known is not None:
            found[path] = (*known[:4], digest)
    return found


def plan(archive: dict[str, State], sandbox: dict[str, State]) -> DeltaPlan:
    """What to remove, extract and chmod so that ``sandbox`` equals ``archive``."""
    result = DeltaPlan()
    for path, state in sandbox.items():
        expected = archive.get(path)
        if expected is None or expected[0] != state[0]:
            result.remove.append(path)  # an extra, or its type changed
    for path, wanted in archive.items():
        now = sandbox.get(path)
        if now == wanted:
            continue
        if now is not None and now[0] == "d" == wanted[0] and now[2:] == wanted[2:]:
            result.modes.append((wanted[1], path))  # only its mode differs
            continue
        result.extract.add(path.lstrip("/"))
        if wanted[0] == "d":
            result.modes.append((wanted[1], path))
    return result
