"""The ``spread`` backend: one run over several member backends, each up to its quota and cap.

Modules: ``_options`` (:class:`SpreadOptions`: the members, their start quotas and caps),
``_ledger`` (what this process knows of each member: live sandboxes, quota tokens, counts)
and ``_backend`` (:class:`SpreadBackend`: placement, then the member's sandbox).
"""

from __future__ import annotations

from ._backend import SpreadBackend
from ._ledger import MemberCounts
from ._options import SpreadMember, SpreadOptions

__all__ = ["MemberCounts", "SpreadBackend", "SpreadMember", "SpreadOptions"]
