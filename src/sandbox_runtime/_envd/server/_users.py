"""Which Unix user an envd request acts as, and how a process or file becomes theirs.

envd takes the user from the ``username`` query parameter (``/files``) or from
``Authorization: Basic base64("<user>:")`` (every route); without either it uses its default
user, which the orchestrator sets in ``/init`` (``user`` in E2B's templates).  An unknown
name is refused with 401.  Switching users needs envd to run as root, as the real envd
does; an envd started as anyone else acts as itself whatever is asked (the emulator's
``local`` instances without a root inside, for instance).
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import os
import pwd
from dataclasses import dataclass

__all__ = ["UnknownUser", "User", "lookup", "requested_name"]


class UnknownUser(Exception):
    """A request named a user the sandbox does not have."""


@dataclass(frozen=True)
class User:
    """One account of the sandbox."""

    name: str
    uid: int
    gid: int
    home: str

    @property
    def switch(self) -> bool:
        """True if acting as this user means changing ids (only root can, and must)."""
        return os.geteuid() == 0 and self.uid != 0

    def groups(self) -> list[int]:
        """The user's supplementary groups, as a login gives them."""
        try:
            return os.getgrouplist(self.name, self.gid)
        except OSError:
            return [self.gid]

    def env(self) -> dict[str, str]:
        """``HOME``, ``USER`` and ``LOGNAME`` of a process started for this user."""
        return {"HOME": self.home, "USER": self.name, "LOGNAME": self.name}

    def own(self, path: str) -> None:
        """Give a file or directory envd created to this user (no-op unless root switches)."""
        if self.switch:
            with contextlib.suppress(OSError):
                os.lchown(path, self.uid, self.gid)


def current() -> User:
    """The user envd itself runs as."""
    uid = os.geteuid()
    try:
        entry = pwd.getpwuid(uid)
    except KeyError:
        return User(str(uid), uid, os.getegid(), os.environ.get("HOME", "/"))
    return User(entry.pw_name, entry.pw_uid, entry.pw_gid, entry.pw_dir)


def lookup(name: str) -> User:
    """The account called ``name``; envd acting as itself when it cannot switch."""
    try:
        entry = pwd.getpwnam(name)
    except KeyError as exc:
        raise UnknownUser(f"invalid username: '{name}'") from exc
    user = User(entry.pw_name, entry.pw_uid, entry.pw_gid, entry.pw_dir)
    if os.geteuid() != 0 and user.uid != os.geteuid():
        return current()
    return user


def requested_name(headers: dict[str, str], query: dict[str, str]) -> str | None:
    """The user a request names (``username`` parameter, then Basic authorization)."""
    if query.get("username"):
        return query["username"]
    authorization = headers.get("authorization", "")
    scheme, _, encoded = authorization.partition(" ")
    if scheme.lower() != "basic" or not encoded:
        return None
    try:
        decoded = base64.b64decode(encoded.strip()).decode()
    except (binascii.Error, UnicodeDecodeError):
        return None
    return decoded.partition(":")[0] or None
