"""How many pages a listing has, and which items are on a page."""


def page_count(total, per_page):
    """The number of pages needed for ``total`` items, ``per_page`` on each (at least 1)."""
    if per_page <= 0:
        raise ValueError("per_page must be positive")
    if total <= 0:
        return 1
    return total // per_page + 1


def page_bounds(page, total, per_page):
    """``(start, stop)`` indexes of the items on 1-based ``page``."""
    if not 1 <= page <= page_count(total, per_page):
        raise IndexError(f"page {page} out of range")
    start = (page - 1) * per_page
    return start, min(start + per_page, total)
