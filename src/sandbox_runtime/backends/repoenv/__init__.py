"""The ``repoenv`` backend: an R2E-Gym dataset entry readied as R2E-Gym's ``RepoEnv`` does.

Modules: ``_options`` (:class:`RepoEnvOptions`: the entry and its engine) and ``_backend``
(:class:`RepoEnvBackend`: the engine's sandbox, then R2E-Gym's setup in it).  It is the one
backend above the SWE layer: it reads its entry with :mod:`sandbox_runtime.swe`'s R2E-Gym
format, a dependency the layer map names (``docs/architecture.md``).
"""

from __future__ import annotations

from ._backend import RepoEnvBackend
from ._options import RepoEnvOptions

__all__ = ["RepoEnvBackend", "RepoEnvOptions"]
