"""Reading the protobuf request bodies client-go sends for built-in types.

Typed client-go clients (``kubectl create namespace``, ``kubectl create serviceaccount``,
``kubectl delete`` of some kinds) send ``application/vnd.kubernetes.protobuf`` rather than
JSON, and a real API server accepts both.  The emulator reads just what those requests carry:
the envelope (the magic ``k8s`` plus a NUL byte, then a ``runtime.Unknown`` naming apiVersion
and kind), the object's ``ObjectMeta`` (name, generateName, namespace, labels, annotations)
and, for ``DeleteOptions``, ``gracePeriodSeconds``.  Any other field of a protobuf body is
dropped (a difference listed in ``docs/kubernetes.md``); JSON bodies carry everything.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

__all__ = ["CONTENT_TYPE", "decode"]

CONTENT_TYPE = "application/vnd.kubernetes.protobuf"
_MAGIC = b"k8s\x00"
_VARINT, _FIXED64, _BYTES, _FIXED32 = 0, 1, 2, 5


def _varint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if at >= len(data):
            raise ValueError("truncated varint")
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, at
        shift += 7


def _fields(data: bytes) -> Iterator[tuple[int, int | bytes]]:
    """(field number, value) pairs of one message; varints as ints, the rest as bytes."""
    at = 0
    while at < len(data):
        key, at = _varint(data, at)
        number, wire = key >> 3, key & 7
        if wire == _VARINT:
            value, at = _varint(data, at)
            yield number, value
        elif wire == _BYTES:
            size, at = _varint(data, at)
            if at + size > len(data):
                raise ValueError("truncated field")
            yield number, data[at : at + size]
            at += size
        elif wire in (_FIXED64, _FIXED32):
            width = 8 if wire == _FIXED64 else 4
            yield number, data[at : at + width]
            at += width
        else:
            raise ValueError(f"unsupported wire type {wire}")


def _text(value: int | bytes) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)


def _entry(value: int | bytes) -> tuple[str, str]:
    pair = {
        number: _text(item) for number, item in _fields(value if isinstance(value, bytes) else b"")
    }
    return pair.get(1, ""), pair.get(2, "")


def _object_meta(data: bytes) -> dict[str, Any]:
    names = {1: "name", 2: "generateName", 3: "namespace"}
    meta: dict[str, Any] = {}
    for number, value in _fields(data):
        if number in names:
            meta[names[number]] = _text(value)
        elif number in (11, 12):
            key, item = _entry(value)
            meta.setdefault("labels" if number == 11 else "annotations", {})[key] = item
    return meta


def decode(body: bytes) -> dict[str, Any]:
    """The JSON-shaped dict of a protobuf body; ``ValueError`` when it is not one."""
    if not body.startswith(_MAGIC):
        raise ValueError("missing the k8s protobuf envelope")
    kind = api_version = ""
    raw = b""
    for number, value in _fields(body[len(_MAGIC) :]):
        if number == 1 and isinstance(value, bytes):
            for inner, item in _fields(value):
                if inner == 1:
                    api_version = _text(item)
                elif inner == 2:
                    kind = _text(item)
        elif number == 2 and isinstance(value, bytes):
            raw = value
    obj: dict[str, Any] = {"apiVersion": api_version, "kind": kind}
    for number, value in _fields(raw):
        if kind == "DeleteOptions" and number == 1 and isinstance(value, int):
            obj["gracePeriodSeconds"] = value - (1 << 64) if value >= 1 << 63 else value
        elif kind != "DeleteOptions" and number == 1 and isinstance(value, bytes):
            obj["metadata"] = _object_meta(value)
    return obj
