"""Split single CSV rows."""

from csvline.core import split_row

__all__ = ["split_row"]
