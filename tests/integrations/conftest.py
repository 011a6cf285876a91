"""The integration tests use the SWE tests' bundled tasks and sample cache."""

from tests.swe.conftest import _sample_cache, bundled_tasks

__all__ = ["_sample_cache", "bundled_tasks"]
