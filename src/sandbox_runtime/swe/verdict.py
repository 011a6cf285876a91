"""What grading one model-written patch found (:mod:`sandbox_runtime.swe.patch_reward`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from sandbox_runtime._core.usage import SandboxUsage
from sandbox_runtime.swe.grading import GradeResult
from sandbox_runtime.swe.outcome_record import SUSPECT_STATES
from sandbox_runtime.swe.tamper import TamperFlag

__all__ = ["PatchVerdict", "integrity_counts"]


def integrity_counts(grade: GradeResult | None, tamper: list[TamperFlag]) -> dict[str, int]:
    """How one submission probed the grader, as 0/1 counts a trainer can sum.

    ``flagged``: a tamper flag, a refused patch, a tripped canary or a forged test log;
    ``dropped``: files strict grading kept from the tests; ``refused``: the patch text was
    refused whole; ``canary_tripped``: the canary test that must fail was reported passed;
    ``output_forged``: the test log contradicts pytest's out-of-band record
    (:mod:`sandbox_runtime.swe.outcome_record`).
    """
    refused = int(bool(grade is not None and grade.refused))
    tripped = int(grade is not None and grade.canary == "tripped")
    forged = int(grade is not None and grade.outcome_record in SUSPECT_STATES)
    return {
        "flagged": int(bool(tamper) or bool(refused) or bool(tripped) or bool(forged)),
        "dropped": len(grade.dropped) if grade is not None else 0,
        "refused": refused,
        "canary_tripped": tripped,
        "output_forged": forged,
    }


@dataclass
class PatchVerdict:
    """A patch's grade, what it changed that grading reads, and what its sandbox used."""

    grade: GradeResult
    tamper: list[TamperFlag] = field(default_factory=list)
    usage: SandboxUsage = field(default_factory=SandboxUsage)
    grading_seconds: float = 0.0

    def extra_info(self) -> dict[str, float | int]:
        """Numbers for verl's ``reward_extra_info`` (one value per key and response)."""
        used = self.usage
        return {
            **integrity_counts(self.grade, self.tamper),
            "start_latency": round(used.start_latency, 3),
            "sandbox_seconds": round(used.sandbox_seconds, 3),
            "commands": used.commands,
            "command_seconds": round(used.command_seconds, 3),
            "bytes_up": used.bytes_up,
            "bytes_down": used.bytes_down,
            "retries": sum(used.retries.values()),
            "faults": sum(used.faults.values()),
            "grading_seconds": round(self.grading_seconds, 3),
        }
