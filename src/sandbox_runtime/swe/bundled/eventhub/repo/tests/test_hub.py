import unittest

from eventhub import Hub, Subscriber


class TestHub(unittest.TestCase):
    def test_delivers_to_followers(self):
        hub = Hub()
        reader = Subscriber("r", topics=["news"])
        hub.add(reader)
        self.assertEqual(hub.publish("news", "hello"), 1)
        self.assertEqual(reader.received, ["hello"])

    def test_other_topics_ignored(self):
        hub = Hub()
        reader = Subscriber("r", topics=["sport"])
        hub.add(reader)
        self.assertEqual(hub.publish("news", "hello"), 0)
