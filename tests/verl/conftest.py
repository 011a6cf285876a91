"""verl's tests need verl (and torch): they run in their own virtualenv.

``scripts/test.sh`` builds ``.venv-verl`` (torch CPU, verl from PyPI, this project) and runs
this directory there; the main suite, whose virtualenv has no verl, does not collect it.
"""

from __future__ import annotations

import importlib.util

collect_ignore_glob = [] if importlib.util.find_spec("verl") is not None else ["test_*.py"]

if importlib.util.find_spec("verl") is not None:
    # The bundled tasks and the per-session sample cache, as the SWE tests have them.
    from tests.swe.conftest import _sample_cache, bundled_tasks

    __all__ = ["_sample_cache", "bundled_tasks"]
