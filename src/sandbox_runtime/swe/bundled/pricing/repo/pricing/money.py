"""Rounding and formatting of prices."""


def format_price(amount, currency=""):
    """Format ``amount`` with two decimals, rounding half up (0.125 -> 0.13)."""
    text = f"{round(amount, 2):.2f}"
    return f"{currency}{text}"


def total(amounts, currency=""):
    """The formatted sum of ``amounts``."""
    return format_price(sum(amounts), currency)
