"""Money helpers."""

from pricing.money import format_price, total

__all__ = ["format_price", "total"]
