"""The core: the sandbox API, the backend contract and what every backend shares."""
