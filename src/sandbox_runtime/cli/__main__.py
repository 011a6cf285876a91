"""``python -m sandbox_runtime.cli``: the same command line as ``sandbox-runtime``."""

from __future__ import annotations

import sys

from sandbox_runtime.cli import main

sys.exit(main())
