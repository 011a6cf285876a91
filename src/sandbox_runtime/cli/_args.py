"""Argument types and option parsing shared by the subcommands.

Ranges are checked by argparse itself (``-j 0`` is a usage error with exit code 2, before
anything runs), and ``--backend-option KEY=VALUE`` values are JSON when they parse as JSON,
so lists and tables (``volumes``, ``engine_options``) can be given on the command line.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable
from typing import Any

from sandbox_runtime._core.registry import load_backend
from sandbox_runtime.errors import ConfigError, SandboxError

__all__ = [
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

    from sandbox_runtime._core.registry import load_backend

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
    """The price that applies to ``backend``.

    Its own, else one given for any backend, else the backend's published rate
    (``Backend.published_price``: e2b), else none.
    """
    chosen = dict(prices or [])
    if backend in chosen or "" in chosen:
        return chosen.get(backend, chosen.get(""))
    try:
        return load_backend(backend).published_price
    except SandboxError:  # an unknown backend is reported where it is opened
        return None


def run_interruptibly(runner: Any, progress: Any) -> list[Any] | None:
    """``runner.run()``; ``None`` when interrupted (Ctrl-C, or SIGTERM: see ``cli.run``).

    An interrupted run has closed every sandbox it opened (the runner does that); this says
    so on stderr, and the caller exits 130.
    """
    try:
        outcomes: list[Any] = runner.run()
        return outcomes
    except KeyboardInterrupt:
        progress.close()
        print(f"interrupted: closed every sandbox of run {runner.run_id}", file=sys.stderr)
        return None
