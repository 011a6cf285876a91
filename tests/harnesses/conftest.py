"""The harness adapters' tests: they need their harness (mini-swe-agent, inspect-ai, swe-rex).

The harnesses do not share the main test venv (their dependencies would move packages the
rest of the suite pins), so ``scripts/test.sh`` runs these files in ``.venv-harness`` with
``SANDBOX_RUNTIME_HARNESS_TESTS=1``; there a missing harness fails the run.  Elsewhere a file
whose harness is not installed is not collected.
"""

from __future__ import annotations

import importlib.util
import os

from tests.swe.conftest import _sample_cache

__all__ = ["_sample_cache"]

# test_harbor.py needs no harness installed (Harbor does not import on 3.11; the test brings
# a double of its interface), so it is collected everywhere.
_NEEDS = {
    "test_minisweagent.py": "minisweagent",
    "test_inspect.py": "inspect_ai",
    "test_inspect_conformance.py": "inspect_ai",
    "test_swerex.py": "swerex",
}

collect_ignore = [
    name
    for name, module in _NEEDS.items()
    if os.environ.get("SANDBOX_RUNTIME_HARNESS_TESTS") != "1"
    and importlib.util.find_spec(module) is None
]
