"""The ``kubernetes`` backend: a sandbox is a pod, driven through the official client.

Modules: ``_options`` (:class:`KubernetesOptions`), ``_client`` (configuration, the shared
client, reading its errors), ``_labels`` (ownership labels as Kubernetes labels and
annotations), ``_names`` (Kubernetes' rules for names, labels and quantities, shared with the
emulator), ``_exec`` (one exec over the websocket), ``_backend`` (:class:`KubernetesBackend`).
``docs/kubernetes.md`` has the guide and the RBAC rules.

The classes are imported on first use, so that the emulator can use ``_names`` without the
kubernetes client installed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._backend import KubernetesBackend
    from ._options import KubernetesOptions

__all__ = ["KubernetesBackend", "KubernetesOptions"]


def __getattr__(name: str) -> Any:
    if name == "KubernetesBackend":
        from ._backend import KubernetesBackend

        return KubernetesBackend
    if name == "KubernetesOptions":
        from ._options import KubernetesOptions

        return KubernetesOptions
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
