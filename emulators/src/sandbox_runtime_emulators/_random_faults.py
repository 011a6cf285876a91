"""Random, seeded faults for the emulators: a plane fails a fraction of its requests.

``sandbox-runtime ags emulator --fault envd:0.05`` and ``sandbox-runtime kubernetes emulator
--fault api:0.1:rate_limit,drop`` both come here: each request of a plane draws, with the
plane's rate, one of the chosen kinds, from one generator seeded by ``--fault-seed`` so that a
run can be repeated.  What a kind does is the emulator's business; the draw is shared.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["FaultDraws", "RandomFaults", "parse_fault_spec"]


@dataclass(frozen=True)
class RandomFaults:
    """Faults of ``kinds`` on a fraction ``rate`` of one plane's requests."""

    plane: str
    rate: float
    kinds: tuple[str, ...]


def parse_fault_spec(
    text: str, *, planes: Sequence[str], kinds: Sequence[str], default: Sequence[str]
) -> RandomFaults:
    """``PLANE:RATE[:KIND,KIND...]``; ``ValueError`` naming what is wrong."""
    parts = text.split(":")
    if len(parts) not in (2, 3):
        raise ValueError(f"--fault {text!r}: expected PLANE:RATE[:KIND,...]")
    plane, rate_text = parts[0], parts[1]
    if plane not in planes:
        raise ValueError(f"--fault {text!r}: plane must be one of {', '.join(planes)}")
    try:
        rate = float(rate_text)
    except ValueError:
        raise ValueError(f"--fault {text!r}: rate must be a number from 0 to 1") from None
    if not 0 <= rate <= 1:
        raise ValueError(f"--fault {text!r}: rate must be between 0 and 1")
    chosen = tuple(k for k in parts[2].split(",") if k) if len(parts) == 3 else tuple(default)
    unknown = [k for k in chosen if k not in kinds]
    if unknown or not chosen:
        raise ValueError(
            f"--fault {text!r}: kinds must be among {', '.join(kinds)} (got {unknown or 'none'})"
        )
    return RandomFaults(plane, rate, chosen)


class FaultDraws:
    """The random faults in force, and the seeded generator that draws them (thread-safe)."""

    def __init__(self, seed: int | None = None, specs: Sequence[RandomFaults] = ()) -> None:
        self._lock = threading.Lock()
        self._specs = list(specs)
        self._rng = random.Random(seed)

    def add(self, spec: RandomFaults) -> None:
        """Fail a fraction of a plane's requests from now on."""
        with self._lock:
            self._specs.append(spec)

    def clear(self) -> None:
        """No more random faults."""
        with self._lock:
            self._specs.clear()

    def draw(self, plane: str) -> str | None:
        """The fault this request of ``plane`` meets, if any."""
        with self._lock:
            for spec in self._specs:
                if spec.plane == plane and self._rng.random() < spec.rate:
                    return self._rng.choice(spec.kinds)
        return None

    def slow_delay(self) -> float:
        """How late a ``slow`` fault answers: 0.2 to 1 second."""
        with self._lock:
            return self._rng.uniform(0.2, 1.0)
