"""The emulators' shared command-line flags: injected faults, rate limits and latencies.

Each flag's values are parsed as argparse reads them, so a typo is a one-line usage error
(exit 2) before an emulator starts.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable
from typing import Any

__all__ = ["add_fault_arguments", "add_limit_arguments", "quotas"]


def _usage_errors(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    """``parse`` as an argparse type: its ``ValueError`` becomes a one-line usage error."""

    def convert(text: str) -> Any:
        try:
            return parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    return convert


def add_fault_arguments(
    parser: argparse.ArgumentParser, spec_parser: str, planes_and_kinds: str
) -> None:
    """An emulator's ``--fault PLANE:RATE[:KIND,...]`` (repeatable) and ``--fault-seed``.

    ``spec_parser`` names the emulator's ``parse_fault_spec`` (``module:function``), imported
    only when the flag is used; ``planes_and_kinds`` is the help's list of both.
    """
    module, _, function = spec_parser.partition(":")

    def fault_spec(text: str) -> Any:
        parse: Callable[[str], Any] = getattr(importlib.import_module(module), function)
        return parse(text)

    parser.add_argument(
        "--fault",
        action="append",
        default=[],
        type=_usage_errors(fault_spec),
        metavar="PLANE:RATE[:KIND,...]",
        help=f"fail a fraction of a plane's requests ({planes_and_kinds}; default kinds: the "
        "first four, which a careful client recovers from); repeatable",
    )
    parser.add_argument(
        "--fault-seed", type=int, default=None, help="seed of the fault draws (a repeatable run)"
    )


def add_limit_arguments(parser: argparse.ArgumentParser, operations: str, realistic: str) -> None:
    """An emulator's ``--rate-limit OP=QPS[:BURST]`` / ``realistic`` and ``--latency OP=SECONDS``.

    Both repeatable; parsed by ``sandbox_runtime_emulators._ratelimit`` (standard library
    only), so a typo is a usage error before the emulator starts.  ``operations`` says what an
    OP is for this emulator, ``realistic`` what the ``realistic`` preset holds.
    """
    from sandbox_runtime_emulators._ratelimit import parse_latency, parse_rate_limit

    def rate_limit(text: str) -> Any:
        return text if text == "realistic" else parse_rate_limit(text)

    parser.add_argument(
        "--rate-limit",
        action="append",
        default=[],
        type=_usage_errors(rate_limit),
        metavar="OP=QPS[:BURST]",
        help=f"refuse an operation's requests over QPS per second per caller, as the real "
        f"service does ({operations}; * = every operation without its own); 'realistic' = "
        f"{realistic}; repeatable, later ones win; default: no limit",
    )
    parser.add_argument(
        "--latency",
        action="append",
        default=[],
        type=_usage_errors(parse_latency),
        metavar="OP=SECONDS",
        help="answer an operation's admitted requests SECONDS late; repeatable",
    )


def quotas(specs: list[Any], realistic: dict[str, Any]) -> dict[str, Any]:
    """``--rate-limit`` values in order: ``realistic`` expands to the emulator's preset."""
    chosen: dict[str, Any] = {}
    for spec in specs:
        if spec == "realistic":
            chosen.update(realistic)
        else:
            chosen[spec[0]] = spec[1]
    return chosen
