"""The one patch format strict grading accepts: git's unified diff, read fully here.

A patch tool is lenient by design: ``patch`` skips what it does not understand, reads context
diffs, ed scripts and normal diffs, and applies hunks with fuzz; ``git apply --recount``
repairs hunk counts.  A grader that splits a patch into files with one reader and applies it
with another can be shown one file and handed two (a unified hunk for ``README.md`` followed
by a context-diff section creating ``conftest.py``).  Strict grading therefore reads the
patch text itself, line by line, before anything runs: every line after the first section
belongs to a section this module recognizes, or the patch is refused
(:class:`PatchRefused`, an error of the submission, with the line number).  What it accepts:

* ``diff --git`` sections with git's extended headers (``old mode``/``new mode``, ``new file
  mode``, ``deleted file mode``, ``rename from/to``, ``copy from/to``, ``similarity index``,
  ``dissimilarity index``, ``index``), their ``---``/``+++`` lines and hunks, or a ``GIT
  binary patch`` (``literal``/``delta`` blocks of base-85 lines);
* plain unified sections (``--- a/x`` then ``+++ b/x``, as models write them);
* prose before the first section (a model's explanation), and blank lines between
  sections and after the last (left out of what is applied).

Each hunk's line counts must match its header exactly (no recount), each path must be
relative, inside the repository, carry git's ``a/``/``b/`` prefixes and stay out of
``.git``; a gitlink (mode 160000) is refused.  The accepted text is rebuilt from the sections
alone (the prose is left out), so what is applied is exactly what was read.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

__all__ = ["PatchRefused", "PatchSection", "read_patch"]

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@(.*)$")
_MODE = re.compile(r"^(?:100644|100755|120000)$")
_INDEX = re.compile(r"^index [0-9a-f]+\.\.[0-9a-f]+(?: (\d{6}))?$")
_SCORE = re.compile(r"^(?:dis)?similarity index \d{1,3}%$")
_BINARY_SIZE = re.compile(r"^(literal|delta) \d+$")
_BASE85 = re.compile(r"^[A-Za-z][0-9A-Za-z!#$%&()*+;<=>?@^_`{|}~-]+$")
_QUOTED_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}


class PatchRefused(ValueError):
    """The patch text is not (only) git's unified diff; strict grading applies none of it."""

    def __init__(self, line: int, why: str) -> None:
        super().__init__(f"patch line {line}: {why}" if line else why)
        self.line = line
        self.why = why


@dataclass
class PatchSection:
    """One file's section of a unified diff, as read."""

    old_path: str | None
    """The path before the change (``None`` for a new file)."""
    new_path: str | None
    """The path after the change (``None`` for a deleted file)."""
    text: str
    start_line: int
    old_mode: str | None = None
    new_mode: str | None = None
    rename: bool = False
    copy: bool = False
    binary: bool = False
    added: list[str] = field(default_factory=list)
    """The lines the hunks add (without ``+``), e.g. a new symlink's target."""

    @property
    def paths(self) -> tuple[str, ...]:
        """Every path the section names, the old one first (once when they are the same)."""
        names = [p for p in (self.old_path, self.new_path) if p is not None]
        return tuple(dict.fromkeys(names)) or ("",)

    @property
    def symlink(self) -> bool:
        """True when the section creates or changes a symbolic link."""
        return self.new_mode == "120000"


def _unquote(raw: str, line: int) -> str:
    """A path as git writes it: plain, or C-quoted with octal escapes for non-ASCII bytes."""
    if not (len(raw) >= 2 and raw[0] == raw[-1] == '"'):
        return raw
    body, out, index = raw[1:-1], bytearray(), 0
    while index < len(body):
        char = body[index]
        if char != "\\":
            out += char.encode()
            index += 1
            continue
        escape = body[index + 1 : index + 2]
        if escape in _QUOTED_ESCAPES:
            out += _QUOTED_ESCAPES[escape].encode()
            index += 2
        elif escape in ('"', "\\"):
            out += escape.encode()
            index += 2
        elif re.fullmatch(r"[0-3][0-7]{2}", body[index + 1 : index + 4]):
            out.append(int(body[index + 1 : index + 4], 8))
            index += 4
        else:
            raise PatchRefused(line, f"bad escape in the quoted path {raw}")
    try:
        return out.decode()
    except UnicodeDecodeError:
        raise PatchRefused(line, f"the quoted path {raw} is not UTF-8") from None


def _checked(path: str, line: int) -> str:
    """``path`` (prefix stripped) if it stays inside the repository, else refused."""
    if not path or path.startswith("/") or "\\" in path or "\0" in path:
        raise PatchRefused(line, f"path {path!r} is not a relative path in the repository")
    parts = path.split("/")
    if any(part in ("", ".", "..") for part in parts):
        raise PatchRefused(line, f"path {path!r} has an empty, '.' or '..' component")
    if any(part.lower() == ".git" for part in parts):
        raise PatchRefused(line, f"path {path!r} is inside .git")
    return path


def _prefixed(raw: str, prefix: str, line: int) -> str | None:
    """A ``---``/``+++`` name: ``None`` for /dev/null, else the path without ``a/``/``b/``."""
    name = _unquote(raw.split("\t", 1)[0].rstrip("\r"), line)
    if name == "/dev/null":
        return None
    if not name.startswith(prefix):
        raise PatchRefused(line, f"path {name!r} lacks git's {prefix!r} prefix (applied -p1)")
    return _checked(name[len(prefix) :], line)


def _git_header_paths(header: str, line: int) -> tuple[str, str]:
    """The two paths of ``diff --git a/X b/Y`` (either possibly quoted)."""
    rest = header[len("diff --git ") :].rstrip("\r")
    if rest.startswith('"'):
        end = rest.find('"', 1)
        while end > 0 and rest[end - 1] == "\\":
            end = rest.find('"', end + 1)
        if end < 0:
            raise PatchRefused(line, "unterminated quoted path in the diff --git header")
        first, second = rest[: end + 1], rest[end + 2 :]
    else:
        # Unquoted names hold no space-then-``b/`` ambiguity when both paths are the same.
        half = (len(rest) - 1) // 2
        if rest[half : half + 1] == " " and rest[2:half] == rest[half + 3 :]:
            first, second = rest[:half], rest[half + 1 :]
        else:
            first, _, second = rest.partition(" b/")
            second = "b/" + second
    old = _unquote(first, line)
    new = _unquote(second, line)
    if not (old.startswith("a/") and new.startswith("b/")):
        raise PatchRefused(line, "diff --git header without git's a/ and b/ prefixes")
    return _checked(old[2:], line), _checked(new[2:], line)


class _Reader:
    """A cursor over the patch's lines that reads one section at a time."""

    def __init__(self, text: str) -> None:
        self.lines = text.splitlines(keepends=True)
        self.at = 0

    def peek(self, offset: int = 0) -> str:
        index = self.at + offset
        return self.lines[index].rstrip("\n") if index < len(self.lines) else ""

    def done(self) -> bool:
        return self.at >= len(self.lines)

    def starts_section(self) -> bool:
        line = self.peek()
        return line.startswith("diff --git ") or (
            line.startswith("--- ") and self.peek(1).startswith("+++ ")
        )

    def take(self) -> str:
        line = self.lines[self.at]
        self.at += 1
        return line

    @property
    def number(self) -> int:
        """The 1-based number of the line under the cursor."""
        return self.at + 1


def _read_hunks(reader: _Reader, section: PatchSection, chunks: list[str]) -> None:
    """Every hunk up to the next section or the end; a count that does not match is refused."""
    hunks = 0
    while not reader.done() and not reader.starts_section():
        header = reader.peek()
        match = _HUNK.match(header.rstrip("\r"))
        if match is None:
            if not header.strip():  # a blank line between sections (models write them)
                reader.take()
                continue
            raise PatchRefused(reader.number, f"not part of a unified diff: {header[:80]!r}")
        chunks.append(reader.take())
        hunks += 1
        old = int(match.group(2)) if match.group(2) is not None else 1
        new = int(match.group(4)) if match.group(4) is not None else 1
        while old > 0 or new > 0:
            if reader.done():
                raise PatchRefused(reader.number, "the hunk ends before its line counts")
            line = reader.peek()
            kind = line[:1]
            if kind in (" ", "") and old > 0 and new > 0:  # an empty line is empty context
                old, new = old - 1, new - 1
            elif kind == "-" and old > 0:
                old -= 1
            elif kind == "+" and new > 0:
                new -= 1
                section.added.append(line[1:])
            elif kind == "\\":
                pass
            else:
                raise PatchRefused(
                    reader.number, f"the hunk's line counts do not match at {line[:80]!r}"
                )
            chunks.append(reader.take())
        while reader.peek().startswith("\\ "):  # "\ No newline at end of file"
            chunks.append(reader.take())
    changed = section.rename or section.copy or section.old_mode or section.binary
    if hunks == 0 and section.old_path is not None and section.new_path is not None and not changed:
        raise PatchRefused(section.start_line, "a section with no change in it")


def _read_binary(reader: _Reader, chunks: list[str]) -> None:
    """A ``GIT binary patch``: one or two ``literal``/``delta`` blocks of base-85 lines."""
    chunks.append(reader.take())
    for block in range(2):
        size = reader.peek().rstrip("\r")
        if not _BINARY_SIZE.match(size):
            if block == 0:
                raise PatchRefused(reader.number, "a binary patch without a literal/delta block")
            return
        chunks.append(reader.take())
        while reader.peek().rstrip("\r") != "":
            if not _BASE85.match(reader.peek().rstrip("\r")):
                raise PatchRefused(reader.number, "a binary patch line that is not base 85")
            chunks.append(reader.take())
        if reader.done():
            raise PatchRefused(reader.number, "a binary patch block without its closing blank")
        chunks.append(reader.take())


def _read_extended(line: str, number: int, section: PatchSection) -> bool:
    """Record one extended header line of a ``diff --git`` section; False if it is none."""
    value = line.rsplit(" ", 1)[-1]
    if line.startswith(("old mode ", "new mode ", "new file mode ", "deleted file mode ")):
        if not _MODE.match(value):
            raise PatchRefused(number, f"file mode {value!r} is refused (gitlink/unknown)")
        if line.startswith("new file mode "):
            section.old_path, section.new_mode = None, value
        elif line.startswith("deleted file mode "):
            section.new_path, section.old_mode = None, value
        elif line.startswith("old mode "):
            section.old_mode = value
        else:
            section.new_mode = value
    elif line.startswith(("rename from ", "copy from ", "rename to ", "copy to ")):
        section.rename = section.rename or line.startswith("rename")
        section.copy = section.copy or line.startswith("copy")
        named = _checked(_unquote(line.split(" ", 2)[2], number), number)
        expected = section.old_path if " from " in line[:12] else section.new_path
        if named != expected:
            raise PatchRefused(number, "rename/copy path differs from the diff --git header")
    elif line.startswith("index "):
        match = _INDEX.match(line)
        if match is None or (match.group(1) and not _MODE.match(match.group(1))):
            raise PatchRefused(number, f"bad index line {line[:80]!r}")
        if match.group(1):
            section.new_mode = section.new_mode or match.group(1)
    elif not _SCORE.match(line):
        return False
    return True


def _read_git_section(reader: _Reader) -> PatchSection:
    start = reader.number
    header = reader.take()
    old, new = _git_header_paths(header.rstrip("\n"), start)
    section = PatchSection(old, new, "", start)
    chunks = [header]
    while not reader.done() and _read_extended(reader.peek().rstrip("\r"), reader.number, section):
        chunks.append(reader.take())
    if reader.peek().startswith("--- ") and reader.peek(1).startswith("+++ "):
        minus = _prefixed(reader.peek()[4:], "a/", reader.number)
        plus = _prefixed(reader.peek(1)[4:], "b/", reader.number + 1)
        if minus != section.old_path or plus != section.new_path:
            raise PatchRefused(reader.number, "---/+++ paths differ from the diff --git header")
        chunks += [reader.take(), reader.take()]
    elif reader.peek().startswith("GIT binary patch"):
        section.binary = True
        _read_binary(reader, chunks)
    elif reader.peek().startswith("Binary files "):
        raise PatchRefused(reader.number, "a binary change without its data (use --binary)")
    _read_hunks(reader, section, chunks)
    section.text = "".join(chunks)
    return section


def _read_plain_section(reader: _Reader) -> PatchSection:
    start = reader.number
    old = _prefixed(reader.peek()[4:], "a/", start)
    new = _prefixed(reader.peek(1)[4:], "b/", start + 1)
    if old is None and new is None:
        raise PatchRefused(start, "both sides of the section are /dev/null")
    section = PatchSection(old, new, "", start)
    if old is not None and new is not None and old != new:
        raise PatchRefused(start, "a plain unified section cannot rename; use diff --git")
    chunks = [reader.take(), reader.take()]
    if not _HUNK.match(reader.peek().rstrip("\r")):
        raise PatchRefused(reader.number, "a plain unified section without a hunk")
    _read_hunks(reader, section, chunks)
    section.text = "".join(chunks)
    return section


def read_patch(text: str) -> list[PatchSection]:
    """Every section of ``text``, or :class:`PatchRefused` for anything else in it.

    Prose before the first section is skipped; nothing after it may be anything but a
    section (or a blank line between sections).  A text with no section at all is refused.
    """
    reader = _Reader(text)
    while not reader.done() and not reader.starts_section():
        reader.take()
    if reader.done():
        raise PatchRefused(0, "no unified diff in the text")
    sections: list[PatchSection] = []
    while not reader.done():
        if reader.peek().startswith("diff --git "):
            sections.append(_read_git_section(reader))
        elif reader.starts_section():
            sections.append(_read_plain_section(reader))
        elif not reader.peek().strip():
            reader.take()
        else:
            raise PatchRefused(reader.number, f"not part of a unified diff: {reader.peek()!r}")
    seen: set[str] = set()
    for section in sections:
        for path in {section.old_path, section.new_path} - {None}:
            assert path is not None
            if path in seen and not section.copy:
                raise PatchRefused(section.start_line, f"{path} is changed by two sections")
            seen.add(path)
    return sections
