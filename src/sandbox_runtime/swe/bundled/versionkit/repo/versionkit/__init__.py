"""Semantic-ish version numbers."""

from versionkit.version import Version, latest

__all__ = ["Version", "latest"]
