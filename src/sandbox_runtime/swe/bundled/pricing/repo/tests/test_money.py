import unittest

from pricing import format_price, total


class TestFormatPrice(unittest.TestCase):
    def test_two_decimals(self):
        self.assertEqual(format_price(3), "3.00")

    def test_currency(self):
        self.assertEqual(format_price(1.5, currency="$"), "$1.50")

    def test_total(self):
        self.assertEqual(total([1, 2.25]), "3.25")
