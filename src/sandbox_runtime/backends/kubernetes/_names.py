"""Kubernetes naming and quantity rules, shared by the kubernetes backend and its emulator.

The backend needs them to turn our ownership labels into valid label keys and values, and the
emulator needs the same rules to refuse what a real API server refuses (422 Invalid).  They
are pure functions on strings, so neither side imports the other.
"""

from __future__ import annotations

import re

__all__ = [
    "cpu_cores",
    "dns1123_label_problem",
    "dns1123_subdomain_problem",
    "label_key_problem",
    "label_value_problem",
    "memory_bytes",
]

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_NAME_PART = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_QUANTITY = re.compile(
    r"^([+]?[0-9]+(?:\.[0-9]*)?|[+]?\.[0-9]+)(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)?$"
)
_SUFFIX = {
    "": 1.0,
    "n": 1e-9,
    "u": 1e-6,
    "m": 1e-3,
    "k": 1e3,
    "M": 1e6,
    "G": 1e9,
    "T": 1e12,
    "P": 1e15,
    "E": 1e18,
    "Ki": 2.0**10,
    "Mi": 2.0**20,
    "Gi": 2.0**30,
    "Ti": 2.0**40,
    "Pi": 2.0**50,
    "Ei": 2.0**60,
}


def dns1123_label_problem(value: str) -> str | None:
    """Why ``value`` is not an RFC 1123 label (container names, namespaces), or None."""
    if len(value) > 63:
        return "must be no more than 63 characters"
    if not _DNS_LABEL.match(value):
        return (
            "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or "
            "'-', and must start and end with an alphanumeric character"
        )
    return None


def dns1123_subdomain_problem(value: str) -> str | None:
    """Why ``value`` is not an RFC 1123 subdomain (pod names, label prefixes), or None."""
    if len(value) > 253:
        return "must be no more than 253 characters"
    if not value or not all(_DNS_LABEL.match(part) for part in value.split(".")):
        return (
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, "
            "'-' or '.', and must start and end with an alphanumeric character"
        )
    return None


def label_key_problem(key: str) -> str | None:
    """Why ``key`` is not a qualified name (``[prefix/]name``) usable as a label key, or None."""
    prefix, slash, name = key.rpartition("/")
    if slash and (not prefix or dns1123_subdomain_problem(prefix)):
        return "prefix part must be a lowercase RFC 1123 subdomain"
    if not name or len(name) > 63:
        return "name part must be non-empty and no more than 63 characters"
    if not _NAME_PART.match(name):
        return (
            "name part must consist of alphanumeric characters, '-', '_' or '.', and must "
            "start and end with an alphanumeric character"
        )
    return None


def label_value_problem(value: str) -> str | None:
    """Why ``value`` is not a valid label value, or None (the empty string is valid)."""
    if len(value) > 63:
        return "must be no more than 63 characters"
    if not _LABEL_VALUE.match(value):
        return (
            "a valid label must be an empty string or consist of alphanumeric characters, '-', "
            "'_' or '.', and must start and end with an alphanumeric character"
        )
    return None


def _quantity(value: str | int | float) -> float:
    if isinstance(value, (int, float)):
        return float(value)
    match = _QUANTITY.match(value.strip())
    if not match:
        raise ValueError(f"quantities must match the regular expression of a Quantity: {value!r}")
    number, suffix = match.groups()
    return float(number) * _SUFFIX[suffix or ""]


def cpu_cores(value: str | int | float) -> float:
    """A CPU quantity (``"500m"``, ``"2"``, ``1.5``) in cores; ValueError if malformed."""
    return _quantity(value)


def memory_bytes(value: str | int | float) -> int:
    """A memory quantity (``"512Mi"``, ``"1G"``, ``134217728``) in bytes; ValueError if bad."""
    return int(_quantity(value))
