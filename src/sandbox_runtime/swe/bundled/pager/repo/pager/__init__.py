"""Pagination arithmetic."""

from pager.pages import page_bounds, page_count

__all__ = ["page_bounds", "page_count"]
