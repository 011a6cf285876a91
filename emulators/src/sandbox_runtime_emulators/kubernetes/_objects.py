"""Plain API objects: stored, listed, selected and deleted, with nothing running behind them.

Namespaces, ServiceAccounts and Events are data to the API server: what makes them behave
(a namespace's termination, the ``default`` account of every namespace, events recorded by
the node) lives in ``_namespaces`` and ``_pods``.  :class:`ObjectTable` is the storage all
three share: the metadata the server fills in (``uid``, ``creationTimestamp``,
``resourceVersion``, ``generateName``), ``AlreadyExists`` / ``NotFound`` bodies naming the
resource, and every write recorded in the :class:`~._changes.ChangeLog` that watches read.
"""

from __future__ import annotations

import copy
import secrets
import time
import uuid
from collections.abc import Callable
from typing import Any

from sandbox_runtime.backends.kubernetes._names import (
    dns1123_label_problem,
    dns1123_subdomain_problem,
)

from ._changes import ChangeLog
from ._selectors import FieldSelector, LabelSelector
from ._status import already_exists, bad_request, invalid, not_found

__all__ = ["ObjectTable", "now"]


def now() -> str:
    """The current time as the API server writes timestamps (RFC 3339, seconds, UTC)."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


class ObjectTable:
    """The objects of one resource (``namespaces``, ``serviceaccounts``, ``events``, ...)."""

    def __init__(
        self,
        changes: ChangeLog,
        resource: str,
        kind: str,
        *,
        namespaced: bool,
        fields: dict[str, Callable[[dict[str, Any]], str]],
        label_names: bool = False,
        api_version: str = "v1",
    ) -> None:
        self.changes = changes
        self.resource = resource
        self.kind = kind
        self.namespaced = namespaced
        self.fields = fields
        self._label_names = label_names  # names must be DNS-1123 labels (namespaces)
        self.api_version = api_version  # ``group/version`` of an API group's resource
        self._objects: dict[tuple[str, str], dict[str, Any]] = {}

    # -- writes -------------------------------------------------------------------------------

    def create(self, namespace: str | None, body: Any) -> dict[str, Any]:
        """Store a new object; the server's 400, 409 or 422 when it would refuse it."""
        if not isinstance(body, dict) or body.get("kind", self.kind) != self.kind:
            raise bad_request(f"the body must be a {self.kind} object")
        obj = copy.deepcopy(body)
        meta = obj.setdefault("metadata", {})
        if self.namespaced:
            if meta.get("namespace") not in (None, "", namespace):
                raise bad_request(
                    "the namespace of the provided object does not match the namespace sent "
                    "on the request"
                )
            meta["namespace"] = namespace
        with self.changes.lock:
            if not meta.get("name") and meta.get("generateName"):
                meta["name"] = str(meta["generateName"]) + secrets.token_hex(3)[:5]
            name = str(meta.get("name") or "")
            problem = (
                "Required value: name or generateName is required"
                if not name
                else (dns1123_label_problem if self._label_names else dns1123_subdomain_problem)(
                    name
                )
            )
            if problem:
                raise invalid(self.kind, name, [("metadata.name", problem)])
            key = (namespace or "", name)
            if key in self._objects:
                raise already_exists(self.resource, name)
            meta.update(uid=str(uuid.uuid4()), creationTimestamp=now())
            obj.update(apiVersion=self.api_version, kind=self.kind)
            self._objects[key] = obj
            self.changes.record(self.resource, "ADDED", obj)
            return copy.deepcopy(obj)

    def update(
        self, namespace: str | None, name: str, change: Callable[[dict[str, Any]], None]
    ) -> dict[str, Any]:
        """Apply ``change`` to the stored object and record it as MODIFIED; a copy of the result."""
        with self.changes.lock:
            obj = self._live(namespace, name)
            change(obj)
            self.changes.record(self.resource, "MODIFIED", obj)
            return copy.deepcopy(obj)

    def delete(self, namespace: str | None, name: str) -> dict[str, Any]:
        """Remove an object now; the object as it was, or 404."""
        with self.changes.lock:
            obj = self._live(namespace, name)
            del self._objects[(namespace or "", name)]
            self.changes.record(self.resource, "DELETED", obj)
            return copy.deepcopy(obj)

    # -- reads -------------------------------------------------------------------------------

    def _live(self, namespace: str | None, name: str) -> dict[str, Any]:
        obj = self._objects.get((namespace or "", name))
        if obj is None:
            raise not_found(self.resource, name)
        return obj

    def get(self, namespace: str | None, name: str) -> dict[str, Any]:
        """A copy of the object, or 404."""
        with self.changes.lock:
            return copy.deepcopy(self._live(namespace, name))

    def exists(self, namespace: str | None, name: str) -> bool:
        """True when the object is stored."""
        with self.changes.lock:
            return (namespace or "", name) in self._objects

    def names(self, namespace: str | None) -> list[str]:
        """Names of the objects in ``namespace`` (all of them when cluster-scoped)."""
        with self.changes.lock:
            return sorted(n for (ns, n) in self._objects if namespace is None or ns == namespace)

    def selector(self, label_selector: str, field_selector: str) -> Callable[[Any], bool]:
        """A predicate for objects of this resource; 400 when a selector does not parse."""
        try:
            labels = LabelSelector(label_selector)
            fields = FieldSelector(field_selector, self.fields)
        except ValueError as exc:
            raise bad_request(str(exc)) from exc
        return lambda obj: bool(
            labels.matches(obj["metadata"].get("labels") or {}) and fields.matches(obj)
        )

    def list(
        self, namespace: str | None, label_selector: str = "", field_selector: str = ""
    ) -> list[dict[str, Any]]:
        """Copies of the matching objects, by namespace and name (as etcd returns them)."""
        matches = self.selector(label_selector, field_selector)
        with self.changes.lock:
            return [
                copy.deepcopy(obj)
                for key, obj in sorted(self._objects.items())
                if (namespace is None or key[0] == namespace) and matches(obj)
            ]
