import unittest

from versionkit import Version, latest


class TestParse(unittest.TestCase):
    def test_missing_parts(self):
        self.assertEqual(str(Version("2")), "2.0.0")

    def test_leading_v(self):
        self.assertEqual(Version("v1.2.3"), Version("1.2.3"))

    def test_rejects_garbage(self):
        with self.assertRaises(ValueError):
            Version("1.x")


class TestCompare(unittest.TestCase):
    def test_single_digits(self):
        self.assertLess(Version("1.2.3"), Version("1.3.0"))

    def test_latest_empty(self):
        self.assertIsNone(latest([]))
