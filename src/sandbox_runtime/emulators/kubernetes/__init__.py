"""A local Kubernetes API server subset, wire-compatible with the official ``kubernetes`` client.

It serves pods (create, get, list with label and field selectors, delete), their status as a
kubelet would report it, ``activeDeadlineSeconds``, and ``pods/exec`` over the websocket
channel protocols, with every pod a real Docker container.  The ``kubernetes`` backend and
the unmodified client run against it in tests; start it with :class:`KubernetesEmulator` or
``sandbox-runtime kubernetes emulator``.  Where it differs from a real cluster is written down
in ``docs/kubernetes.md``.

Modules: ``_status`` (Status bodies), ``_selectors`` (label and field selectors),
``_validation`` (what the server refuses, and its defaults), ``_docker`` (the container
runtime), ``_pods`` (the store plus scheduler and kubelet), ``_exec`` (the exec websocket),
``_http`` (routes and auth), ``server`` (:class:`KubernetesEmulator`).

Importing this package is cheap: :class:`KubernetesEmulator` (which needs docker-py and
wsproto) loads on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .server import KubernetesEmulator

__all__ = ["KubernetesEmulator"]


def __getattr__(name: str) -> Any:
    if name == "KubernetesEmulator":
        from .server import KubernetesEmulator

        return KubernetesEmulator
    raise AttributeError(name)
