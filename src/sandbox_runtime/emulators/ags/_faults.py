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

import random
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

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


@dataclass(frozen=True)
class RandomFaults:
    """Faults of ``kinds`` on a fraction ``rate`` of one plane's requests."""

    plane: str
    rate: float
    kinds: tuple[str, ...] = RECOVERABLE_KINDS


def parse_fault_spec(text: str) -> RandomFaults:
    """``PLANE:RATE[:KIND,KIND...]`` (``envd:0.05``, ``cloud:0.2:rate_limit,drop``)."""
    parts = text.split(":")
    if len(parts) not in (2, 3):
        raise ValueError(f"--fault {text!r}: expected PLANE:RATE[:KIND,...]")
    plane, rate_text = parts[0], parts[1]
    if plane not in _PLANES:
        raise ValueError(f"--fault {text!r}: plane must be one of {', '.join(_PLANES)}")
    try:
        rate = float(rate_text)
    except ValueError:
        raise ValueError(f"--fault {text!r}: rate must be a number from 0 to 1") from None
    if not 0 <= rate <= 1:
        raise ValueError(f"--fault {text!r}: rate must be between 0 and 1")
    kinds = tuple(k for k in parts[2].split(",") if k) if len(parts) == 3 else RECOVERABLE_KINDS
    unknown = [k for k in kinds if k not in RANDOM_KINDS]
    if unknown or not kinds:
        raise ValueError(
            f"--fault {text!r}: kinds must be among {', '.join(RANDOM_KINDS)} (got {unknown})"
        )
    return RandomFaults(plane, rate, kinds)


class FaultBook:
    """The armed faults and the request log, safe to use from tests in other threads."""

    def __init__(self, seed: int | None = None) -> None:
        self._lock = threading.Lock()
        self._faults: list[Fault] = []
        self._random: list[RandomFaults] = []
        self._rng = random.Random(seed)
        self._log: list[RequestRecord] = []

    def inject_random(self, spec: RandomFaults) -> None:
        """Fail a fraction of a plane's requests from now on (see the module docstring)."""
        with self._lock:
            self._random.append(spec)

    def draw(self, plane: str) -> str | None:
        """The random fault this request of ``plane`` meets, if any (seeded, thread-safe)."""
        with self._lock:
            for spec in self._random:
                if spec.plane == plane and self._rng.random() < spec.rate:
                    return self._rng.choice(spec.kinds)
        return None

    def slow_delay(self) -> float:
        """How late a ``slow`` random fault answers."""
        with self._lock:
            return self._rng.uniform(0.2, 1.0)

    def inject(self, kind: FaultKind, **fields: Any) -> Fault:
        """Arm a fault; keyword arguments are :class:`Fault` fields."""
        fault = Fault(kind=kind, **fields)
        with self._lock:
            self._faults.append(fault)
        return fault

    def clear(self) -> None:
        """Disarm every fault and forget the request log."""
        with self._lock:
            self._faults.clear()
            self._random.clear()
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

    def record(self, plane: str, operation: str, status: int, fault: Fault | None) -> None:
        """Remember one answered request."""
        with self._lock:
            self._log.append(RequestRecord(plane, operation, status, fault.kind if fault else None))

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
