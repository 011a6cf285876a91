"""``--config FILE``: a subcommand's flags from a TOML or YAML file.

Keys are the flags' long names (``backend``, ``jobs``, ``backend-option``; dashes or
underscores), values are typed as the flags are, and a flag given on the command line wins
over the file.  ``backend-option`` may be a table; list flags (``select``, ``tasks``) take
lists.  An unknown key is an error naming the file and the key.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from sandbox_runtime.errors import ConfigError

__all__ = ["apply_config"]


def _load(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from None
    if path.suffix.lower() in (".yaml", ".yml"):
        try:
            import yaml  # type: ignore[import-untyped,unused-ignore]
        except ImportError:
            raise ConfigError(f"{path}: reading YAML needs PyYAML: pip install pyyaml") from None
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise ConfigError(f"{path}: not valid YAML: {exc}") from None
    else:
        if sys.version_info >= (3, 11):
            import tomllib
        else:  # pragma: no cover - Python 3.10
            import tomli as tomllib  # type: ignore[import-not-found,unused-ignore]
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: must hold a table of flag = value")
    return data


def _action_for(parser: argparse.ArgumentParser, key: str) -> argparse.Action | None:
    wanted = key.replace("_", "-").lstrip("-")
    for action in parser._actions:
        names = [option.lstrip("-") for option in action.option_strings if option.startswith("--")]
        if wanted in names or action.dest == key.replace("-", "_"):
            return action
    return None


def _convert(action: argparse.Action, key: str, value: Any, path: Path) -> Any:
    def one(item: Any) -> Any:
        if action.type is None or not callable(action.type):
            return item if isinstance(item, str) else json.dumps(item)
        try:
            return action.type(item if isinstance(item, str) else str(item))
        except (argparse.ArgumentTypeError, ValueError) as exc:
            raise ConfigError(f"{path}: {key}: {exc}") from None

    if isinstance(action, argparse._StoreTrueAction):
        if not isinstance(value, bool):
            raise ConfigError(f"{path}: {key}: expected true or false")
        return value
    if isinstance(action, argparse._AppendAction) or action.nargs in ("*", "+"):
        if action.dest == "backend_option" and isinstance(value, dict):
            return [f"{k}={v if isinstance(v, str) else json.dumps(v)}" for k, v in value.items()]
        items = value if isinstance(value, list) else [value]
        return [one(item) for item in items]
    return one(value)


def apply_config(parser: argparse.ArgumentParser, path: Path) -> None:
    """Make the file's values the defaults of ``parser``'s flags."""
    defaults: dict[str, Any] = {}
    for key, value in _load(path).items():
        action = _action_for(parser, key)
        if action is None or action.dest in ("help", "config", "handler"):
            raise ConfigError(f"{path}: unknown key {key!r} (keys are this command's flags)")
        if action.choices is not None and value not in action.choices:
            allowed = ", ".join(map(str, action.choices))
            raise ConfigError(f"{path}: {key}: must be one of {allowed}")
        defaults[action.dest] = _convert(action, key, value, path)
    parser.set_defaults(**defaults)
