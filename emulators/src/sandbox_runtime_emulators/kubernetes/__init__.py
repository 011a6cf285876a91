"""A local Kubernetes API server subset that the ``kubernetes`` client and kubectl accept.

It serves pods (create, get, list with label and field selectors, watch, delete, logs), their
status as a kubelet would report it, ``activeDeadlineSeconds``, ``pods/exec`` over the
websocket channel protocols, namespaces (with termination), service accounts, events,
PersistentVolumeClaims and the ``snapshot.storage.k8s.io/v1`` VolumeSnapshot resources, over
HTTPS with a CA made per emulator, with every pod a real Docker container (``offline_images``
runs them from local images whatever the pull policy).  The ``kubernetes`` backend, the
unmodified client and kubectl run against it in tests; start it with
:class:`KubernetesEmulator` or ``sandbox-runtime kubernetes emulator``.  Where it differs from a
real cluster is written down in ``docs/kubernetes.md``.

Modules: ``_status`` (Status bodies), ``_selectors`` (label and field selectors),
``_validation`` (what the server refuses, and its defaults), ``_changes`` (resource versions
and the history watches read), ``_objects`` (plain stored objects), ``_namespaces``
(namespaces, service accounts, events), ``_docker`` (the container runtime), ``_pods`` (the
pod store plus scheduler and kubelet), ``_volumes`` (claims and snapshots, in Docker
volumes), ``_exec`` (the exec websocket), ``_streams`` (watch and log streams), ``_protobuf``
(protobuf request bodies), ``_tls`` (the CA and serving certificate), ``_http`` (routes and
auth), ``server`` (:class:`KubernetesEmulator`).

Importing this package is cheap: :class:`KubernetesEmulator` (which needs docker-py,
wsproto and cryptography) loads on first use.
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
