"""Label and field selectors, as ``?labelSelector=`` and ``?fieldSelector=`` carry them.

Label selectors take the equality forms (``k=v``, ``k==v``, ``k!=v``), the set forms
(``k in (a,b)``, ``k notin (a,b)``) and existence (``k``, ``!k``), comma-separated and all
required.  As on the real server, ``!=`` and ``notin`` also match objects without the key.
Field selectors take ``=``, ``==`` and ``!=`` on the few fields each resource lists
(``POD_FIELDS``, ``NAMESPACE_FIELDS``, ``NAME_FIELDS``, ``EVENT_FIELDS``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from sandbox_runtime.backends.kubernetes._names import label_key_problem, label_value_problem

__all__ = [
    "EVENT_FIELDS",
    "NAMESPACE_FIELDS",
    "NAME_FIELDS",
    "POD_FIELDS",
    "FieldSelector",
    "LabelSelector",
]

_SET_TERM = re.compile(r"^\s*(\S+)\s+(in|notin)\s+\((.*)\)\s*$")
_EQUALITY_TERM = re.compile(r"^\s*([^=!\s]+)\s*(==|=|!=)\s*(\S*)\s*$")
_EXISTS_TERM = re.compile(r"^\s*(!?)\s*([^=!\s(),]+)\s*$")


def _split_terms(selector: str) -> list[str]:
    """Split on commas that are not inside a parenthesised value set."""
    terms: list[str] = []
    current: list[str] = []
    depth = 0
    for char in selector:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        if char == "," and depth == 0:
            terms.append("".join(current))
            current = []
        else:
            current.append(char)
    terms.append("".join(current))
    return [term for term in terms if term.strip()]


@dataclass(frozen=True, slots=True)
class _Requirement:
    key: str
    operator: str  # "in", "notin", "exists", "!exists"
    values: frozenset[str]

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        if self.operator == "exists":
            return present
        if self.operator == "!exists":
            return not present
        if self.operator == "in":
            return present and labels[self.key] in self.values
        return not present or labels[self.key] not in self.values


def _check_key(key: str) -> str:
    problem = label_key_problem(key)
    if problem:
        raise ValueError(f"unable to parse requirement: invalid label key {key!r}: {problem}")
    return key


def _check_value(value: str) -> str:
    problem = label_value_problem(value)
    if problem:
        raise ValueError(f"unable to parse requirement: invalid label value {value!r}: {problem}")
    return value


def _parse_term(term: str) -> _Requirement:
    match = _SET_TERM.match(term)
    if match:
        key, operator, values = match.groups()
        parts = [value.strip() for value in values.split(",")]
        if not parts or any(not part for part in parts):
            raise ValueError(f"unable to parse requirement: empty value in set {term!r}")
        return _Requirement(_check_key(key), operator, frozenset(_check_value(p) for p in parts))
    match = _EQUALITY_TERM.match(term)
    if match:
        key, operator, value = match.groups()
        return _Requirement(
            _check_key(key), "notin" if operator == "!=" else "in", frozenset({_check_value(value)})
        )
    match = _EXISTS_TERM.match(term)
    if match:
        negated, key = match.groups()
        return _Requirement(_check_key(key), "!exists" if negated else "exists", frozenset())
    raise ValueError(f"unable to parse requirement: {term.strip()!r}")


class LabelSelector:
    """A parsed label selector; ``ValueError`` (a 400 for the caller) if it does not parse."""

    def __init__(self, selector: str) -> None:
        self._requirements = [_parse_term(term) for term in _split_terms(selector)]

    def matches(self, labels: Mapping[str, str]) -> bool:
        """True when every requirement holds for ``labels``."""
        return all(requirement.matches(labels) for requirement in self._requirements)


#: Pod fields a field selector may name, and how to read each from a pod object.
POD_FIELDS: dict[str, Callable[[dict[str, Any]], str]] = {
    "metadata.name": lambda pod: str(pod["metadata"]["name"]),
    "metadata.namespace": lambda pod: str(pod["metadata"]["namespace"]),
    "status.phase": lambda pod: str(pod["status"].get("phase", "")),
    "spec.nodeName": lambda pod: str(pod["spec"].get("nodeName", "")),
    "spec.restartPolicy": lambda pod: str(pod["spec"].get("restartPolicy", "")),
}


def _path(*keys: str) -> Callable[[dict[str, Any]], str]:
    def read(obj: dict[str, Any]) -> str:
        value: Any = obj
        for key in keys:
            value = value.get(key) if isinstance(value, dict) else None
        return "" if value is None else str(value)

    return read


#: Namespace fields (``kubectl get ns`` and the namespace controller select on these).
NAMESPACE_FIELDS: dict[str, Callable[[dict[str, Any]], str]] = {
    "metadata.name": _path("metadata", "name"),
    "status.phase": _path("status", "phase"),
}
#: Fields of objects that have nothing to select on but their names.
NAME_FIELDS: dict[str, Callable[[dict[str, Any]], str]] = {
    "metadata.name": _path("metadata", "name"),
    "metadata.namespace": _path("metadata", "namespace"),
}
#: Event fields (``kubectl describe`` selects a pod's events by ``involvedObject.*``).
EVENT_FIELDS: dict[str, Callable[[dict[str, Any]], str]] = {
    **NAME_FIELDS,
    **{
        f"involvedObject.{key}": _path("involvedObject", key)
        for key in ("kind", "namespace", "name", "uid", "apiVersion", "resourceVersion")
    },
    "reason": _path("reason"),
    "type": _path("type"),
    "source": _path("source", "component"),
}


class FieldSelector:
    """A parsed field selector (``status.phase=Running,metadata.name!=x``) over ``fields``."""

    def __init__(
        self, selector: str, fields: dict[str, Callable[[dict[str, Any]], str]] | None = None
    ) -> None:
        table = POD_FIELDS if fields is None else fields
        self._terms: list[tuple[Callable[[dict[str, Any]], str], bool, str]] = []
        for term in _split_terms(selector):
            match = _EQUALITY_TERM.match(term)
            if not match:
                raise ValueError(f"invalid field selector term {term.strip()!r}")
            field, operator, value = match.groups()
            getter = table.get(field)
            if getter is None:
                raise ValueError(
                    f"field label not supported: {field} (supported: {', '.join(table)})"
                )
            self._terms.append((getter, operator != "!=", value))

    def matches(self, obj: dict[str, Any]) -> bool:
        """True when every term holds for ``obj``."""
        return all((getter(obj) == value) == equal for getter, equal, value in self._terms)
