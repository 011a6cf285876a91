"""A hub that delivers published events to the subscribers of their topic."""


class Subscriber:
    """Someone who receives the events of the topics they follow."""

    def __init__(self, name, topics=[]):
        self.name = name
        self.topics = topics
        self.received = []

    def follow(self, topic):
        """Start receiving events of ``topic``."""
        if topic not in self.topics:
            self.topics.append(topic)


class Hub:
    """Delivers events to subscribers."""

    def __init__(self):
        self.subscribers = []

    def add(self, subscriber):
        """Register ``subscriber``."""
        self.subscribers.append(subscriber)

    def publish(self, topic, event):
        """Deliver ``event`` to every subscriber following ``topic``; returns how many."""
        count = 0
        for subscriber in self.subscribers:
            if topic in subscriber.topics:
                subscriber.received.append(event)
                count += 1
        return count
