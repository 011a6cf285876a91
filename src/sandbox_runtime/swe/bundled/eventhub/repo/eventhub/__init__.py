"""In-process publish/subscribe."""

from eventhub.hub import Hub, Subscriber

__all__ = ["Hub", "Subscriber"]
