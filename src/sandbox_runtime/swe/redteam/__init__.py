"""The red-team corpus: reward hacks as data, and a runner that plays them through the grader.

:mod:`~sandbox_runtime.swe.redteam.hacks` holds the hacks (none contains a fix),
:mod:`~sandbox_runtime.swe.redteam.corpus` runs them through ``run`` and ``compute_score``
and judges each result, :mod:`~sandbox_runtime.swe.redteam.matrix` prints the table;
``SWEEnv`` and rLLM's evaluator are added by :mod:`sandbox_runtime.integrations.redteam`, and
``sandbox-runtime redteam`` runs them all (docs/reliability.md, "The red-team corpus").
"""

from __future__ import annotations

from sandbox_runtime.swe.redteam.hacks import HACKS, Expect, Hack, HackClass, hack_named
from sandbox_runtime.swe.redteam.responses import Target

__all__ = ["HACKS", "Expect", "Hack", "HackClass", "Target", "hack_named"]
