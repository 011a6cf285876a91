import unittest

from csvline import split_row


class TestSplitRow(unittest.TestCase):
    def test_plain(self):
        self.assertEqual(split_row("a,b,c"), ["a", "b", "c"])

    def test_quoted_delimiter(self):
        self.assertEqual(split_row('"a,b",c'), ["a,b", "c"])

    def test_escaped_quote(self):
        self.assertEqual(split_row('"say ""hi""",x'), ['say "hi"', "x"])

    def test_other_delimiter(self):
        self.assertEqual(split_row("a;b", delimiter=";"), ["a", "b"])
