"""MAJOR.MINOR.PATCH versions that compare the way people expect."""

import functools


@functools.total_ordering
class Version:
    """A version such as ``1.4.2``; missing components count as 0."""

    def __init__(self, text):
        parts = text.strip().lstrip("v").split(".")
        if not 1 <= len(parts) <= 3 or not all(part.isdigit() for part in parts):
            raise ValueError(f"not a version: {text!r}")
        self.parts = tuple(parts + ["0"] * (3 - len(parts)))

    def __str__(self):
        return ".".join(self.parts)

    def __repr__(self):
        return f"Version({str(self)!r})"

    def __eq__(self, other):
        return self._key() == other._key()

    def __lt__(self, other):
        return self._key() < other._key()

    def __hash__(self):
        return hash(self._key())

    def _key(self):
        return self.parts


def latest(versions):
    """The highest of ``versions`` (strings), or None for none."""
    return max(versions, key=Version, default=None)
