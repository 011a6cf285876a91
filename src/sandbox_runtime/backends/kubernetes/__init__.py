"""The ``kubernetes`` backend: a sandbox is a pod, driven through the official client.

Modules: ``_options`` (:class:`KubernetesOptions`), ``_client`` (configuration, the shared
client, reading its errors), ``_labels`` (ownership labels as Kubernetes labels and
annotations), ``_exec`` (one exec over the websocket), ``_backend``
(:class:`KubernetesBackend`).  ``docs/kubernetes.md`` has the guide and the RBAC rules.
"""

from __future__ import annotations

from ._backend import KubernetesBackend
from ._options import KubernetesOptions

__all__ = ["KubernetesBackend", "KubernetesOptions"]
