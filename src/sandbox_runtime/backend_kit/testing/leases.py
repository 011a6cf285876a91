"""Conformance of lifetimes that move (``docs/leases.md``).

A backend that declares :attr:`Capability.EXTEND_LIFETIME` must move the end it enforces
and the one its ``reap`` reads, refuse an end past the hard cap before moving anything, and
keep working after; a backend that does not must refuse with
:class:`~sandbox_runtime.CapabilityUnsupportedError`.  The timing itself (a sandbox outliving
its first lifetime, ending at its new end) is each backend's own test, being slow.
"""

from __future__ import annotations

import pytest

from sandbox_runtime import (
    Capability,
    CapabilityUnsupportedError,
    LifetimeCapError,
    SandboxConfig,
    SandboxRuntime,
    load_backend,
)

__all__ = ["LeaseConformance"]


class LeaseConformance:
    """Mixed into :class:`SandboxConformance`; uses its ``sandbox_config`` fixture."""

    def test_the_end_moves_within_the_cap_or_the_call_is_refused(
        self, sandbox_config: SandboxConfig
    ) -> None:
        config = sandbox_config.model_copy(update={"max_lifetime": sandbox_config.lifetime + 600})
        with SandboxRuntime(config) as sandbox:
            backend = sandbox.backend
            if Capability.EXTEND_LIFETIME not in backend.capabilities_for(backend.options):
                with pytest.raises(CapabilityUnsupportedError):
                    sandbox.extend(60)
                return
            first = sandbox.expires_at
            assert first is not None
            end = sandbox.extend(60)
            assert end == pytest.approx(first + 60)
            assert sandbox.exec("echo moved").stdout == "moved\n"
            with pytest.raises(LifetimeCapError):
                sandbox.extend(3600)
            assert sandbox.expires_at == end, "a refused extension moved the end"
            sandbox.set_lifetime(sandbox_config.lifetime)
            assert sandbox.exec("echo again").stdout == "again\n"
            reaper = load_backend(config.backend)
            reaped = reaper.reap(backend.options, dry_run=True)
            assert sandbox.id not in {found.sandbox_id for found in reaped}
