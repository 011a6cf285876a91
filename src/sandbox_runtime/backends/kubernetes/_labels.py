"""Ownership labels in Kubernetes form.

The ownership module's keys (``sandbox-runtime.owner-pid``) become DNS-prefixed keys
(``sandbox-runtime.io/owner-pid``).  Every value goes into an annotation, which the reaper
reads; a value that is also a valid label value (at most 63 characters of
``[A-Za-z0-9._-]``, alphanumeric at both ends) goes into a label as well, so pods can be
selected by it.  A long host name, for instance, lives only in the annotation.
"""

from __future__ import annotations

from collections.abc import Mapping

from sandbox_runtime.backend_kit import (
    LABEL_PREFIX,
    MANAGED,
    make_labels,
)
from sandbox_runtime.errors import ConfigError

from ._names import label_key_problem, label_value_problem

__all__ = [
    "BACKEND_KEY",
    "MANAGED_SELECTOR",
    "full_labels",
    "key_for",
    "ownership_view",
    "pod_metadata",
]

DOMAIN = "sandbox-runtime.io"
BACKEND_KEY = f"{DOMAIN}/backend"


def key_for(ownership_key: str) -> str:
    """``sandbox-runtime.owner-pid`` -> ``sandbox-runtime.io/owner-pid``."""
    return f"{DOMAIN}/{ownership_key.removeprefix(LABEL_PREFIX + '.')}"


#: Selects this library's pods of this backend (never anyone else's).
MANAGED_SELECTOR = f"{key_for(MANAGED)}=true,{BACKEND_KEY}=kubernetes"


def pod_metadata(
    *,
    lifetime: float,
    run_id: str | None,
    user_labels: Mapping[str, str],
    workdir: str | None = None,
) -> tuple[dict[str, str], dict[str, str]]:
    """(labels, annotations) for a new pod; the user's labels cannot override ours.

    A user label whose value is not a valid label value goes into the annotations under
    the same key; one whose key is not a valid key is a ``ConfigError``.
    """
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}
    for key, value in user_labels.items():
        problem = label_key_problem(key)
        if problem:
            raise ConfigError(f"label key {key!r} is not valid in Kubernetes: {problem}")
        if key.startswith(DOMAIN + "/"):
            raise ConfigError(f"label key {key!r} uses the prefix reserved for sandbox-runtime")
        (annotations if label_value_problem(value) else labels)[key] = value
    ours = make_labels(lifetime=lifetime, run_id=run_id, extra={}, workdir=workdir)
    for key, value in ours.items():
        annotations[key_for(key)] = value
        if label_value_problem(value) is None:
            labels[key_for(key)] = value
    labels[BACKEND_KEY] = "kubernetes"
    return labels, annotations


def full_labels(metadata: Mapping[str, object]) -> dict[str, str]:
    """A pod's user labels (and annotations) with its ownership record, in one key space."""
    found: dict[str, str] = {}
    for source in ("labels", "annotations"):
        entries = metadata.get(source) or {}
        assert isinstance(entries, Mapping)
        for key, value in entries.items():
            if isinstance(key, str) and not key.startswith(DOMAIN + "/"):
                found[key] = str(value)
    return {**found, **ownership_view(metadata)}


def ownership_view(metadata: Mapping[str, object]) -> dict[str, str]:
    """A pod's ownership record in the ownership module's key space, for ``why_reapable``."""
    found: dict[str, str] = {}
    for source in ("labels", "annotations"):  # annotations win: they hold every value
        entries = metadata.get(source) or {}
        assert isinstance(entries, Mapping)
        for key, value in entries.items():
            if isinstance(key, str) and key.startswith(DOMAIN + "/"):
                found[f"{LABEL_PREFIX}.{key.removeprefix(DOMAIN + '/')}"] = str(value)
    return found
