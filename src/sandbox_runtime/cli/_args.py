"""Argument types and option parsing shared by the subcommands.

Ranges are checked by argparse itself (``-j 0`` is a usage error with exit code 2, before
anything runs), and ``--backend-option KEY=VALUE`` values are JSON when they parse as JSON,
so lists and tables (``volumes``, ``engine_options``) can be given on the command line.
"""

from __future__ import annotations

import argparse
import importlib
import json
import signal
import sys
from collections.abc import Callable, Iterable
from typing import Any

from sandbox_runtime.errors import ConfigError

__all__ = [
    "add_fault_arguments",
    "add_limit_arguments",
    "backend_options",
    "count",
    "positive_float",
    "positive_int",
    "price",
    "price_for",
    "run_interruptibly",
]


def positive_int(text: str) -> int:
    """An integer of at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def count(text: str) -> int:
    """A whole number of at least 0."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {value}")
    return value


def positive_float(text: str) -> float:
    """A number of seconds above 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not value > 0 or value != value or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, got {text}")
    return value


def option_value(text: str) -> Any:
    """A JSON list, table or string when the text is one (``[...]``, ``{...}``, ``"..."``).

    Anything else stays text, which the backend's model converts as it does for every option
    (``"8"`` to an int, ``"true"`` to a bool), so a name such as ``tool_name=123`` stays a name.
    """
    if text[:1] in ("[", "{", '"'):
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"not valid JSON: {text!r} ({exc.msg})") from None
    return text


def backend_options(backend: str, items: Iterable[str] | dict[str, Any]) -> dict[str, Any]:
    """``KEY=VALUE`` items (or a table from a config file), checked by the backend's model.

    Checking now makes a typo fail the run before any sandbox starts, not every task.
    """
    from pydantic import ValidationError

    from sandbox_runtime.registry import load_backend

    options: dict[str, Any] = {}
    if isinstance(items, dict):
        options = {key.replace("-", "_"): value for key, value in items.items()}
    else:
        for item in items:
            key, sep, value = item.partition("=")
            if not sep or not key:
                raise ConfigError(f"--backend-option must look like KEY=VALUE, got {item!r}")
            options[key.replace("-", "_")] = option_value(value)
    backend_cls = load_backend(backend)
    if options:
        try:
            backend_cls.options_model.model_validate(options)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()
            )
            raise ConfigError(f"--backend-option: {problems}") from exc
    return options


def price(text: str) -> tuple[str, float]:
    """A ``--price``: ``RATE`` (any backend) or ``BACKEND=RATE``, per sandbox-second."""
    backend, _, rate = text.rpartition("=")
    try:
        value = float(rate)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected RATE or BACKEND=RATE (a price per sandbox-second), got {text!r}"
        ) from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"a price cannot be negative, got {text!r}")
    return backend.strip(), value


def price_for(backend: str, prices: Iterable[tuple[str, float]] | None) -> float | None:
    """The price that applies to ``backend``: its own, else one given for any backend."""
    chosen = dict(prices or [])
    return chosen.get(backend, chosen.get(""))


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

    Both repeatable; parsed by ``sandbox_runtime.emulators._ratelimit`` (standard library
    only), so a typo is a usage error before the emulator starts.  ``operations`` says what an
    OP is for this emulator, ``realistic`` what the ``realistic`` preset holds.
    """
    from sandbox_runtime.emulators._ratelimit import parse_latency, parse_rate_limit

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


def run_interruptibly(runner: Any, progress: Any) -> list[Any] | None:
    """``runner.run()`` with SIGTERM acting as Ctrl-C; ``None`` when interrupted.

    An interrupted run has closed every sandbox it opened (the runner does that); this says
    so on stderr, and the caller exits 130.
    """

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        outcomes: list[Any] = runner.run()
        return outcomes
    except KeyboardInterrupt:
        progress.close()
        print(f"interrupted: closed every sandbox of run {runner.run_id}", file=sys.stderr)
        return None
    finally:
        signal.signal(signal.SIGTERM, previous)
