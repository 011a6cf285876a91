"""The ``sandbox-runtime`` command line (placeholder until the CLI module lands)."""

from __future__ import annotations


def main(argv: list[str] | None = None) -> int:
    """Entry point."""
    return 0
