"""The ``spread`` backend's options: its member backends, in preference order.

Each member names a backend, that backend's own options, and the two limits placement keeps
to: a start quota (starts per second with a burst, a token bucket) and a concurrency cap
(live sandboxes at once).  The members come inline (``members``, a JSON list on the command
line) or from a JSON or TOML file (``members_file``); a bad member is an error naming its
position and field (``members.1.max_live``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from sandbox_runtime.backend_kit import BackendOptions

__all__ = ["SpreadMember", "SpreadOptions"]

#: What a member's name may not hold: it prefixes the member's sandbox ids (``docker:abc``).
_ID_SEPARATOR = ":"


class SpreadMember(BaseModel):
    """One member backend and the limits placement keeps to on it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    backend: str
    """The member's backend name (``ags``, ``kubernetes``, ``docker``, ...)."""
    options: dict[str, Any] = Field(default_factory=dict)
    """That backend's own options (validated by its model when a sandbox is placed on it)."""
    name: str | None = None
    """The prefix of its sandbox ids; the backend name unless two members share a backend."""
    image: str | None = None
    """The image on this member when it needs another name than the config's (a directory
    for ``local``, a registry path for ``ags``; ``""``: none, the member's default); the
    config's image when unset."""
    starts_per_second: float | None = Field(default=None, gt=0)
    """Start quota; ``None``: the service's own where it tells it, else none."""
    burst: int = Field(default=1, ge=1)
    """Starts the quota allows at once after a quiet spell."""
    max_live: int | None = Field(default=None, ge=1)
    """Live sandboxes at most (placed by this process); ``None``: no cap."""

    @model_validator(mode="after")
    def _check(self) -> SpreadMember:
        if self.backend == "spread":
            raise ValueError("backend: a member cannot be spread itself")
        if _ID_SEPARATOR in self.label:
            raise ValueError(f"name: {self.label!r} may not contain {_ID_SEPARATOR!r}")
        _check_member_options(self.backend, self.options)
        return self

    @property
    def label(self) -> str:
        """The name its sandbox ids and accounting use."""
        return self.name or self.backend


class SpreadOptions(BackendOptions):
    """The members, most preferred first."""

    members: list[SpreadMember] = Field(default_factory=list)
    """Inline members (``--backend-option members='[{"backend": "docker"}]'``)."""
    members_file: Path | None = None
    """A JSON file holding the member list, or a TOML file with ``[[members]]`` tables."""
    wait_for_capacity: bool = True
    """When every member is full, wait (up to ``start_timeout``) for one to free up; without
    it such a start fails at once with ``QuotaExceededError``."""

    @model_validator(mode="after")
    def _resolve(self) -> SpreadOptions:
        if self.members_file is not None:
            if self.members:
                raise ValueError("give the members inline or as members_file, not both")
            loaded = _read_members(self.members_file)
            self.members = [SpreadMember.model_validate(item) for item in loaded]
        if not self.members:
            raise ValueError("members: name at least one member backend")
        labels = [member.label for member in self.members]
        twice = sorted({label for label in labels if labels.count(label) > 1})
        if twice:
            raise ValueError(f"members: name {twice[0]!r} is used twice; give each a name")
        return self

    def member(self, label: str) -> SpreadMember:
        """The member called ``label``; ``KeyError`` when there is none."""
        for member in self.members:
            if member.label == label:
                return member
        raise KeyError(label)


def _check_member_options(backend: str, options: dict[str, Any]) -> None:
    """A member's options checked by its backend's model now, so a typo names its field."""
    from pydantic import ValidationError

    from sandbox_runtime.backend_kit import load_backend
    from sandbox_runtime.errors import SandboxError

    try:
        engine_cls = load_backend(backend)
    except SandboxError as exc:
        raise ValueError(f"backend: {exc}") from None
    try:
        engine_cls.options_model.model_validate(options)
    except ValidationError as exc:
        problem = exc.errors()[0]
        where = ".".join(map(str, problem["loc"]))
        raise ValueError(f"options.{where}: {problem['msg']}") from None


def _read_members(path: Path) -> list[Any]:
    """The member list held by a JSON or TOML file."""
    try:
        text = path.expanduser().read_text(encoding="utf-8")
    except OSError as exc:
        raise ValueError(f"members_file: cannot read {path}: {exc.strerror}") from None
    if path.suffix.lower() == ".toml":
        if sys.version_info >= (3, 11):
            import tomllib
        else:  # pragma: no cover - Python 3.10
            import tomli as tomllib  # type: ignore[import-not-found,unused-ignore]
        try:
            loaded: Any = tomllib.loads(text).get("members")
        except tomllib.TOMLDecodeError as exc:
            raise ValueError(f"members_file: {path} is not TOML: {exc}") from None
    else:
        try:
            loaded = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"members_file: {path} is not JSON: {exc.msg}") from None
        if isinstance(loaded, dict):
            loaded = loaded.get("members")
    if not isinstance(loaded, list):
        raise ValueError(f"members_file: {path} must hold a list of members")
    return loaded
