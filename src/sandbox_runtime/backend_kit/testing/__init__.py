"""The conformance suite every backend must pass, packaged so third parties can run it too.

Adopt it in a test module with a subclass and one fixture::

    import pytest
    from sandbox_runtime import SandboxConfig
    from sandbox_runtime.backend_kit.testing import SandboxConformance

    class TestMyBackend(SandboxConformance):
        @pytest.fixture
        def sandbox_config(self) -> SandboxConfig:
            return SandboxConfig(backend="mybackend", image="my-image-with-git")

The image must have ``/bin/sh``, coreutils and ``git``.  Needs ``pytest`` (the ``test`` extra).
"""

from sandbox_runtime.backend_kit.testing.conformance import SandboxConformance

__all__ = ["SandboxConformance"]
