"""Fault injection: make the emulator fail the way a busy cloud does, on request from a test.

A fault matches requests by plane (``cloud`` for the Tencent Cloud API, ``e2b`` for the E2B
REST API, ``envd`` for the data plane) and optionally by operation (a Cloud API action such as
``StartSandboxInstance``, or an E2B route such as ``POST /sandboxes``), and fires for the next
``times`` matching requests.  Kinds:

``rate_limit``
    Cloud API: ``RequestLimitExceeded`` in an HTTP 200 body; E2B and envd: HTTP 429.
``unavailable``
    HTTP 503 from the gateway in front of the service.
``drop``
    The connection is closed without any response (the request is not handled).
``drop_answer``
    The request is handled (a tool or instance it creates exists), then the connection is
    closed without the answer: the lost answer that only idempotency tokens make safe to retry.
``delay``
    The request is handled normally, ``delay`` seconds late (a slow control plane).
``slow_start``
    Instances started by the matching request boot ``delay`` seconds late (and
    ``StartSandboxInstance`` answers at once with status ``STARTING``).
``error``
    Cloud API: the error ``code`` in an HTTP 200 body; E2B: HTTP ``status`` with ``message``.

Every request is also recorded (plane, operation, HTTP status answered), so tests can count
the retries a client made.

Besides these counted faults, a plane can fail at random, at a rate, the way a busy cloud
does (``sandbox-runtime ags emulator --fault envd:0.05``; :meth:`FaultBook.inject_random`):
each request of the plane draws one of the chosen kinds with that probability, from a seeded
generator so that a run can be repeated.  Random kinds add ``slow`` (0.2-1 s late) and
``kill_instance`` (the instance's container dies, as a crashed host would leave it).
"""

from __future__ import annotations

import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from sandbox_runtime_emulators._random_faults import FaultDraws, RandomFaults
from sandbox_runtime_emulators._random_faults import parse_fault_spec as _parse

__all__ = [
    "RANDOM_KINDS",
    "RECOVERABLE_KINDS",
    "Fault",
    "FaultBook",
    "RandomFaults",
    "RequestRecord",
    "parse_fault_spec",
]

#: What a random fault can be.
RANDOM_KINDS = ("rate_limit", "unavailable", "drop", "slow", "drop_answer", "kill_instance")
#: The kinds a careful client can always recover from (nothing was done, or only late):
#: the default of ``--fault PLANE:RATE``.
RECOVERABLE_KINDS = ("rate_limit", "unavailable", "drop", "slow")
_PLANES = ("cloud", "e2b", "envd")

FaultKind = Literal[
    "rate_limit", "unavailable", "drop", "drop_answer", "delay", "slow_start", "error"
]
Plane = Literal["cloud", "e2b", "envd", "any"]


@dataclass
class Fault:
    """One armed fault; see the module docstring for the kinds."""

    kind: FaultKind
    plane: Plane = "any"
    operation: str | None = None
    times: int = 1
    delay: float = 0.0
    code: str = "InternalError"
    status: int = 500
    message: str = "injected fault"

    def matches(self, plane: str, operation: str) -> bool:
        """True if this fault applies to a request of ``plane`` doing ``operation``."""
        if self.plane not in ("any", plane):
            return False
        return self.operation is None or self.operation == operation


@dataclass(frozen=True)
class RequestRecord:
    """One request the emulator answered."""

    plane: str
    operation: str
    status: int
    fault: str | None
    at: float = field(default_factory=time.time)


def parse_fault_spec(text: str) -> RandomFaults:
    """``PLANE:RATE[:KIND,KIND...]`` for this emulator (``envd:0.05``, ``cloud:0.2:drop``)."""
    return _parse(text, planes=_PLANES, kinds=RANDOM_KINDS, default=RECOVERABLE_KINDS)


class FaultBook:
    """The armed faults and the request log, safe to use from tests in other threads."""

    def __init__(self, seed: int | None = None) -> None:
        self._lock = threading.Lock()
        self._faults: list[Fault] = []
        self._draws = FaultDraws(seed)
        self._log: list[RequestRecord] = []

    def inject_random(self, spec: RandomFaults) -> None:
        """Fail a fraction of a plane's requests from now on (see the module docstring)."""
        self._draws.add(spec)

    def draw(self, plane: str) -> str | None:
        """The random fault this request of ``plane`` meets, if any (seeded, thread-safe)."""
        return self._draws.draw(plane)

    def slow_delay(self) -> float:
        """How late a ``slow`` random fault answers."""
        return self._draws.slow_delay()

    def inject(self, kind: FaultKind, **fields: Any) -> Fault:
        """Arm a fault; keyword arguments are :class:`Fault` fields."""
        fault = Fault(kind=kind, **fields)
        with self._lock:
            self._faults.append(fault)
        return fault

    def clear(self) -> None:
        """Disarm every fault and forget the request log."""
        self._draws.clear()
        with self._lock:
            self._faults.clear()
            self._log.clear()

    def take(
        self, plane: str, operation: str, kinds: tuple[str, ...] | None = None
    ) -> Fault | None:
        """The first armed fault for this request, consuming one of its ``times``."""
        with self._lock:
            for fault in self._faults:
                if (kinds is None or fault.kind in kinds) and fault.matches(plane, operation):
                    fault.times -= 1
                    if fault.times <= 0:
                        self._faults.remove(fault)
                    return fault
        return None

    def record(self, plane: str, operation: str, status: int, fault: Fault | str | None) -> None:
        """Remember one answered request.

        ``fault`` is what failed it: a fault, or ``"quota"`` for a refusal by the emulator's
        rate limits.
        """
        kind = fault.kind if isinstance(fault, Fault) else fault
        with self._lock:
            self._log.append(RequestRecord(plane, operation, status, kind))

    def requests(
        self, plane: str | None = None, operation: str | None = None
    ) -> list[RequestRecord]:
        """The recorded requests, optionally of one plane and operation."""
        with self._lock:
            return [
                r
                for r in self._log
                if (plane is None or r.plane == plane)
                and (operation is None or r.operation == operation)
            ]

    def armed(self) -> list[dict[str, Any]]:
        """The armed faults as plain dicts (for the admin endpoint)."""
        with self._lock:
            return [asdict(f) for f in self._faults]
