"""Namespaces and ServiceAccounts, and what the controllers of a real cluster do with them.

A namespace must exist before anything is created in it (404 otherwise) and, once deleted, is
``Terminating`` while its content goes (new content is refused with 403), then disappears, as
the namespace controller does it.  Every namespace gets a ``default`` ServiceAccount when it
is created (the service account controller's job), and a pod naming an account that does not
exist is refused with the ServiceAccount admission plugin's 403.  ``default``,
``kube-system``, ``kube-public`` and ``kube-node-lease`` exist from the start; the first three
cannot be deleted.  Events (``_pods`` records them) are stored here too, per namespace.
"""

from __future__ import annotations

import copy
import logging
import secrets
import threading
from collections.abc import Callable
from typing import Any

from ._changes import ChangeLog
from ._objects import ObjectTable, now
from ._selectors import EVENT_FIELDS, NAME_FIELDS, NAMESPACE_FIELDS
from ._status import ApiError, forbidden, not_found

__all__ = ["BUILT_IN_NAMESPACES", "Namespaces"]

logger = logging.getLogger("sandbox_runtime_emulators.kubernetes")

BUILT_IN_NAMESPACES = ("default", "kube-node-lease", "kube-public", "kube-system")
_PROTECTED = ("default", "kube-public", "kube-system")
_NAME_LABEL = "kubernetes.io/metadata.name"


class Namespaces:
    """The namespaces, their service accounts and their events; thread-safe."""

    def __init__(self, changes: ChangeLog) -> None:
        self.changes = changes
        self.namespaces = ObjectTable(
            changes,
            "namespaces",
            "Namespace",
            namespaced=False,
            fields=NAMESPACE_FIELDS,
            label_names=True,
        )
        self.service_accounts = ObjectTable(
            changes, "serviceaccounts", "ServiceAccount", namespaced=True, fields=NAME_FIELDS
        )
        self.events = ObjectTable(changes, "events", "Event", namespaced=True, fields=EVENT_FIELDS)
        #: Deletes every pod of a namespace (set by the pod store); the namespace controller.
        self.purge_pods: Callable[[str], int] = lambda _namespace: 0
        self._closed = threading.Event()
        for name in BUILT_IN_NAMESPACES:
            self.create({"metadata": {"name": name}})

    def close(self) -> None:
        """Stop the namespace terminations under way."""
        self._closed.set()

    # -- namespaces -------------------------------------------------------------------------

    def create(self, body: Any) -> dict[str, Any]:
        """Create a namespace (``Active``) and its ``default`` service account."""
        namespace = copy.deepcopy(body) if isinstance(body, dict) else body
        if isinstance(namespace, dict):
            meta = namespace.setdefault("metadata", {})
            namespace.setdefault("spec", {})["finalizers"] = ["kubernetes"]
            namespace["status"] = {"phase": "Active"}
            if not meta.get("name") and meta.get("generateName"):
                meta["name"] = str(meta["generateName"]) + secrets.token_hex(3)[:5]
            if meta.get("name"):
                meta.setdefault("labels", {})[_NAME_LABEL] = meta["name"]
        with self.changes.lock:
            created = self.namespaces.create(None, namespace)
            self.service_accounts.create(
                created["metadata"]["name"], {"metadata": {"name": "default"}}
            )
        return created

    def delete(self, name: str) -> dict[str, Any]:
        """Start terminating a namespace; the object, now ``Terminating``."""
        if name in _PROTECTED:
            raise forbidden("namespaces", name, "this namespace may not be deleted")

        def terminate(obj: dict[str, Any]) -> None:
            obj["metadata"].setdefault("deletionTimestamp", now())
            obj["status"]["phase"] = "Terminating"

        with self.changes.lock:
            already = self.namespaces.get(None, name)["status"].get("phase") == "Terminating"
            answer = self.namespaces.update(None, name, terminate)
        if not already:
            threading.Thread(
                target=self._finish_termination, args=(name,), name="k8s-emulator-ns", daemon=True
            ).start()
        return answer

    def _finish_termination(self, name: str) -> None:
        """Delete what the namespace holds, then the namespace (the namespace controller)."""
        try:
            while not self._closed.is_set() and self.purge_pods(name):
                self._closed.wait(0.1)
            with self.changes.lock:
                for table in (self.service_accounts, self.events):
                    for item in table.names(name):
                        table.delete(name, item)
                self.namespaces.delete(None, name)
        except ApiError:  # pragma: no cover - deleted twice by concurrent terminations
            logger.debug("namespace %s was already gone", name)

    def require_active(self, namespace: str, resource: str, name: str) -> None:
        """404 when ``namespace`` does not exist, 403 while it terminates (admission)."""
        with self.changes.lock:
            if not self.namespaces.exists(None, namespace):
                raise not_found("namespaces", namespace)
            phase = self.namespaces.get(None, namespace)["status"].get("phase")
        if phase == "Terminating":
            raise forbidden(
                resource,
                name,
                f"unable to create new content in namespace {namespace} because it is being "
                "terminated",
            )

    # -- service accounts -----------------------------------------------------------------

    def create_service_account(self, namespace: str, body: Any) -> dict[str, Any]:
        """Create a ServiceAccount in an active namespace."""
        name = str(((body or {}).get("metadata") or {}).get("name") or "")
        self.require_active(namespace, "serviceaccounts", name)
        return self.service_accounts.create(namespace, body)

    def require_service_account(self, namespace: str, account: str, pod: str) -> None:
        """The ServiceAccount admission plugin's 403 when a pod names a missing account."""
        if not self.service_accounts.exists(namespace, account):
            raise forbidden(
                "pods",
                pod,
                f"error looking up service account {namespace}/{account}: serviceaccount "
                f'"{account}" not found',
            )

    # -- events --------------------------------------------------------------------------

    def record_event(
        self,
        pod: dict[str, Any],
        reason: str,
        message: str,
        *,
        warning: bool = False,
        component: str = "kubelet",
        host: str = "",
    ) -> None:
        """Record an Event about ``pod`` as the kubelet (or scheduler) would."""
        meta = pod["metadata"]
        namespace = str(meta["namespace"])
        container = pod["spec"]["containers"][0]["name"]
        stamp = now()
        event: dict[str, Any] = {
            "metadata": {"name": f"{meta['name']}.{secrets.token_hex(8)}"},
            "involvedObject": {
                "kind": "Pod",
                "namespace": namespace,
                "name": meta["name"],
                "uid": meta["uid"],
                "apiVersion": "v1",
                "resourceVersion": meta.get("resourceVersion", ""),
            },
            "reason": reason,
            "message": message,
            "source": {"component": component, **({"host": host} if host else {})},
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
            "type": "Warning" if warning else "Normal",
            "eventTime": None,
            "reportingComponent": component,
            "reportingInstance": host,
        }
        if component == "kubelet":
            event["involvedObject"]["fieldPath"] = f"spec.containers{{{container}}}"
        try:
            self.events.create(namespace, event)
        except ApiError:  # the namespace is being emptied: nobody will read it
            logger.debug("event %s for %s/%s dropped", reason, namespace, meta["name"])
