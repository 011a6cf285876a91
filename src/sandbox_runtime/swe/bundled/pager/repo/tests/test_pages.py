import unittest

from pager import page_bounds, page_count


class TestPageCount(unittest.TestCase):
    def test_partial_last_page(self):
        self.assertEqual(page_count(11, 5), 3)

    def test_empty_listing(self):
        self.assertEqual(page_count(0, 5), 1)

    def test_bad_page_size(self):
        with self.assertRaises(ValueError):
            page_count(3, 0)


class TestPageBounds(unittest.TestCase):
    def test_first_page(self):
        self.assertEqual(page_bounds(1, 11, 5), (0, 5))

    def test_last_partial_page(self):
        self.assertEqual(page_bounds(3, 11, 5), (10, 11))
