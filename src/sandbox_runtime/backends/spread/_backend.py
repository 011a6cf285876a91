"""``spread``: one run over several backends, each up to its start quota and concurrency cap.

A training step or an evaluation run needs more starts per second than one provider's quota
(AGS, e2b, Daytona and Modal all cap them) and may have a Kubernetes cluster or a big Docker
host beside the cloud account.  This backend places each new sandbox on a *member*:

* members are tried in the order given (most preferred first), except that one known to hold
  the image already (``Backend.has_image``: docker can tell cheaply) goes first;
* a member is passed over while its cap of live sandboxes is reached or its start quota (a
  token bucket; the service's own from ``Backend.start_quota`` where the member gives none)
  has no token;
* a member whose service refuses the start for its quota (:class:`QuotaExceededError`, after
  the member's own retries) is passed over for a second and the sandbox goes to the next;
  any other start failure is the caller's error, unchanged;
* when no member has room, the start waits (up to ``start_timeout``) for one to free up.

After placement every call is the member's own: its labels (the user's and this library's
ownership labels), its lifetime and extension, its typed errors.  Sandbox ids say which
member holds them (``docker:3f2a...``), so listing, ``connect`` and ``reap`` reach every
member.  Checkpoints, forks and pause are declared unsupported: a checkpoint would have to
be restored on the member that took it, which placement does not promise yet.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

from sandbox_runtime.backend_kit import (
    Availability,
    Backend,
    BackendOptions,
    Capability,
    ExecRequest,
    ExecResult,
    FileInfo,
    ReapedSandbox,
    SandboxConfig,
    SandboxInfo,
    load_backend,
    start_slot,
    validate_options,
)
from sandbox_runtime.errors import (
    ConfigError,
    QuotaExceededError,
    SandboxError,
    SandboxGoneError,
)

from ._ledger import MemberCounts, MemberLedger, ledger_for, wait_for_change
from ._options import SpreadMember, SpreadOptions

__all__ = ["SpreadBackend"]

logger = logging.getLogger("sandbox_runtime.spread")

#: Capabilities never passed through: a checkpoint is bound to the member that took it.
_NOT_DELEGATED = frozenset(
    {
        Capability.CHECKPOINT_FILESYSTEM,
        Capability.CHECKPOINT_MEMORY,
        Capability.FORK,
        Capability.PAUSE,
    }
)


def _engine_of(member: SpreadMember) -> tuple[type[Backend[Any]], BackendOptions]:
    """A member's backend class and its validated options."""
    engine_cls = load_backend(member.backend)
    return engine_cls, engine_cls.options_model.model_validate(member.options)


_Engine = tuple[SpreadMember, type[Backend[Any]], BackendOptions]


def _engine_id(member: SpreadMember) -> str:
    return json.dumps([member.backend, member.options], sort_keys=True, default=str)


def _id_prefix(options: SpreadOptions, member: SpreadMember) -> str:
    """The name in ``MEMBER:ID``: the first member on the same engine (listing agrees)."""
    wanted = _engine_id(member)
    return next(m.label for m in options.members if _engine_id(m) == wanted)


def _distinct_engines(options: SpreadOptions) -> Iterator[_Engine]:
    """Each member whose backend and options differ from an earlier one's.

    Two members on the same engine (other caps, other names) would list and reap the same
    sandboxes twice; the first one's name stands for both.
    """
    seen: set[str] = set()
    for member in options.members:
        key = _engine_id(member)
        if key not in seen:
            seen.add(key)
            engine_cls, engine_options = _engine_of(member)
            yield member, engine_cls, engine_options


class SpreadBackend(Backend[SpreadOptions]):
    """Places each sandbox on a member backend with room, then is that member's sandbox."""

    name: ClassVar[str] = "spread"
    options_model: ClassVar[type[BackendOptions]] = SpreadOptions
    extra: ClassVar[str | None] = None

    def __init__(self, config: SandboxConfig, options: SpreadOptions) -> None:
        super().__init__(config, options)
        self._member: SpreadMember | None = None
        self._engine: Backend[Any] | None = None
        self._ledger: MemberLedger | None = None
        self._stopped = False

    # -- what it can do --------------------------------------------------------------------

    @classmethod
    def capabilities_for(cls, options: BackendOptions) -> frozenset[Capability]:
        """What every member can do, checkpoints, forks and pause excepted.

        The intersection, because a sandbox may land on any member: a capability one member
        lacks cannot be promised before placement.
        """
        opts = cls.coerce_options(options)
        found: frozenset[Capability] | None = None
        engine_images = False
        for member in opts.members:
            engine_cls, engine_options = _engine_of(member)
            own = engine_cls.capabilities_for(engine_options)
            found = own if found is None else found & own
            engine_images |= Capability.ENGINE_IMAGES in own and member.image is None
        # Engine images where any member runs them: placement sends such a sandbox only to
        # members that can run its image (Backend.cannot_run), so a member that cannot is
        # passed over, never handed an image it would refuse.
        extra = frozenset({Capability.ENGINE_IMAGES}) if engine_images else frozenset()
        return ((found or frozenset()) | extra) - _NOT_DELEGATED

    @classmethod
    def availability(cls, options: BackendOptions | None = None) -> Availability:
        """Available when every member is (a member that cannot run would fail its starts)."""
        if options is None:
            return Availability(False, "spread needs members (options.members)")
        for member in cls.coerce_options(options).members:
            try:
                engine_cls, engine_options = _engine_of(member)
            except Exception as exc:  # any reason the member cannot load
                return Availability(False, f"member {member.label!r}: {exc}")
            found = engine_cls.availability(engine_options)
            if not found:
                return Availability(False, f"member {member.label!r}: {found.reason}")
        return Availability(True)

    @classmethod
    def accounting(cls, options: BackendOptions) -> list[MemberCounts]:
        """Per member, in this process: started, refused for quota, failed, passed over, live."""
        return [ledger_for(member).counts() for member in cls.coerce_options(options).members]

    # -- placement -------------------------------------------------------------------------

    @property
    def sandbox_id(self) -> str:
        if self._member is None or self._engine is None:
            return ""
        return f"{_id_prefix(self.options, self._member)}:{self._engine.sandbox_id}"

    @property
    def member(self) -> str | None:
        """The name of the member holding this sandbox (``None`` before placement)."""
        return None if self._member is None else self._member.label

    def _member_backend(self, member: SpreadMember) -> Backend[Any]:
        """A member backend instance for this sandbox's config, the member's image applied."""
        engine_cls = load_backend(member.backend)
        update: dict[str, Any] = {"backend": member.backend, "options": member.options}
        if member.image is not None:
            update["image"] = member.image or None  # "": no image (local's own root)
        config = self.config.model_copy(update=update)
        engine_options = validate_options(config, engine_cls)
        config = engine_cls.configure(config, engine_options)
        return engine_cls(config.model_copy(update={"options": engine_options}), engine_options)

    def _runnable(self) -> list[SpreadMember]:
        """The members that can run this sandbox's image; a ConfigError naming why if none."""
        able: list[SpreadMember] = []
        reasons: list[str] = []
        for member in self.options.members:
            engine_cls, engine_options = _engine_of(member)
            wanted = self.config.image if member.image is None else (member.image or None)
            why = engine_cls.cannot_run(wanted, engine_options)
            if why is None:
                able.append(member)
            else:
                reasons.append(f"{member.label}: {why}")
        if not able:
            raise ConfigError(
                f"no spread member can run image {self.config.image!r}: " + "; ".join(reasons)
            )
        return able

    def _preference(self, members: list[SpreadMember]) -> list[SpreadMember]:
        """``members`` in the order given, those that already hold the image first."""
        members = list(members)
        image = self.config.image
        if image is None:
            return members

        def holds(member: SpreadMember) -> bool:
            engine_cls, engine_options = _engine_of(member)
            try:
                wanted = image if member.image is None else member.image
                return bool(wanted) and engine_cls.has_image(wanted, engine_options) is True
            except Exception:  # a member that cannot tell is simply not preferred
                return False

        return sorted(members, key=lambda member: not holds(member))

    def start(self) -> None:
        """Place the sandbox on the first member with room that accepts it."""
        began = time.monotonic()
        deadline = began + self.config.start_timeout
        refusals: list[str] = []
        runnable = self._runnable()
        for member in runnable:
            _read_service_quota(member)
        while True:
            soonest = math.inf
            for member in self._preference(runnable):
                ledger = ledger_for(member)
                pause = ledger.try_reserve()
                if pause is not None:
                    soonest = min(soonest, pause)
                    continue
                if self._start_on(member, ledger, refusals):
                    return
            left = deadline - time.monotonic()
            if not self.options.wait_for_capacity or left <= 0:
                waited = time.monotonic() - began
                raise QuotaExceededError(_no_room(runnable, refusals, waited, self.options))
            wait_for_change(min(soonest, left, 1.0))

    def _start_on(self, member: SpreadMember, ledger: MemberLedger, refusals: list[str]) -> bool:
        """Start on ``member`` (a slot reserved): True when started, False when it refused."""
        try:
            engine = self._member_backend(member)
            with start_slot(type(engine), engine.options):
                engine.start()
        except QuotaExceededError as exc:
            ledger.settle("refused", str(exc))
            refusals.append(f"{member.label}: {exc}")
            logger.info("member %s refused a start for its quota; trying the next", member.label)
            return False
        except BaseException:
            ledger.settle("failed")
            raise
        ledger.settle("started")
        self._member, self._engine, self._ledger = member, engine, ledger
        return True

    def _placed(self) -> Backend[Any]:
        if self._engine is None:
            raise SandboxError("the spread sandbox is not placed on a member yet: start it first")
        return self._engine

    # -- a running sandbox: the member's own ------------------------------------------------

    def exec(self, request: ExecRequest) -> ExecResult:
        return self._placed().exec(request)

    def put_archive(self, data: bytes) -> None:
        self._placed().put_archive(data)

    def get_archive(self, path: str) -> bytes:
        return self._placed().get_archive(path)

    def write_file(self, path: str, data: bytes, mode: int = 0o644) -> None:
        self._placed().write_file(path, data, mode)

    def read_file(self, path: str) -> bytes:
        return self._placed().read_file(path)

    def exists(self, path: str) -> bool:
        return self._placed().exists(path)

    def stat(self, path: str) -> FileInfo:
        return self._placed().stat(path)

    def list_dir(self, path: str) -> list[FileInfo]:
        return self._placed().list_dir(path)

    def make_dir(self, path: str) -> None:
        self._placed().make_dir(path)

    def remove(self, path: str, *, recursive: bool = False) -> None:
        self._placed().remove(path, recursive=recursive)

    def copy_in(self, host: Path, path: str) -> None:
        self._placed().copy_in(host, path)

    def copy_out(self, path: str, host: Path) -> None:
        self._placed().copy_out(path, host)

    def kill_marked(self, marker: str) -> bool:
        return self._placed().kill_marked(marker)

    def is_alive(self) -> bool:
        return self._engine is not None and self._engine.is_alive()

    def stop(self) -> None:
        if self._engine is None or self._stopped:
            return
        try:
            self._engine.stop()
        finally:
            if not self._stopped and self._ledger is not None:
                self._ledger.stopped()
            self._stopped = True

    # Lifetimes are the member's (docs/leases.md).

    def set_expiry(self, expires_at: float) -> None:
        self._placed().set_expiry(expires_at)

    def max_expiry(self, started_at: float) -> float | None:
        """The member's cap once placed; before, the earliest of the members' caps."""
        if self._engine is not None:
            return self._engine.max_expiry(started_at)
        caps: list[float] = []
        for member in self.options.members:
            try:
                cap = self._member_backend(member).max_expiry(started_at)
            except Exception:  # a member that cannot say has no cap we know of
                cap = None
            if cap is not None:
                caps.append(cap)
        return min(caps) if caps else None

    def gone_cause(self) -> str:
        return self._placed().gone_cause()

    # -- finding sandboxes again: every member's ----------------------------------------

    def attach(self, sandbox_id: str) -> None:
        """Take over ``MEMBER:ID`` on that member (not counted against its cap here)."""
        label, sep, inner = sandbox_id.partition(":")
        try:
            member = self.options.member(label) if sep and inner else None
        except KeyError:
            member = None
        if member is None:
            names = ", ".join(m.label for m in self.options.members)
            raise SandboxGoneError(
                f"no spread sandbox {sandbox_id!r}: ids are MEMBER:ID with a member of {names}"
            )
        engine = self._member_backend(member)
        engine.attach(inner)
        self._member, self._engine = member, engine

    @classmethod
    def list_sandboxes(cls, options: BackendOptions | None = None) -> list[SandboxInfo]:
        """Every member's sandboxes, their ids prefixed with the member's name.

        Without options there are no members to ask: nothing (each member lists its own).
        """
        found: list[SandboxInfo] = []
        if options is None:
            return found
        for member, engine_cls, engine_options in _distinct_engines(cls.coerce_options(options)):
            try:
                listed = engine_cls.list_sandboxes(engine_options)
            except ConfigError:  # this member cannot list (no reconnect); nothing to add
                continue
            found += [
                dataclasses.replace(
                    info, backend=cls.name, sandbox_id=f"{member.label}:{info.sandbox_id}"
                )
                for info in listed
            ]
        return found

    @classmethod
    def reap(
        cls, options: BackendOptions | None = None, *, dry_run: bool = False
    ) -> list[ReapedSandbox]:
        """Every member's reaper: what expired or lost its owner, on any member.

        Without options (``sandbox-runtime reap`` over every backend) there are no members:
        nothing, since that reap runs each member backend's own reaper anyway.
        """
        reaped: list[ReapedSandbox] = []
        if options is None:
            return reaped
        for member, engine_cls, engine_options in _distinct_engines(cls.coerce_options(options)):
            reaped += [
                ReapedSandbox(cls.name, f"{member.label}:{item.sandbox_id}", item.reason)
                for item in engine_cls.reap(engine_options, dry_run=dry_run)
            ]
        return reaped


def _read_service_quota(member: SpreadMember) -> None:
    """Keep to the service's own quota where the member's options set no limits of their own."""
    if member.starts_per_second is not None and member.max_live is not None:
        return
    ledger = ledger_for(member)
    if ledger.quota_read:
        return
    ledger.quota_read = True
    engine_cls, engine_options = _engine_of(member)
    try:
        quota = engine_cls.service_quota(engine_options)
    except Exception as exc:  # the quota is advice: placement still meets refusals
        logger.warning("member %s: cannot read its quota: %s", member.label, exc)
        return
    if quota is not None:
        ledger.set_service_quota(quota)


def _no_room(
    members: list[SpreadMember], refusals: list[str], waited: float, options: SpreadOptions
) -> str:
    """The message of a start no member took (of those that can run its image)."""
    state = "; ".join(
        f"{ledger.member.label}: {ledger.live} live of {_cap(ledger.cap)}"
        for ledger in map(ledger_for, members)
    )
    why = f" (refused: {'; '.join(refusals[-3:])})" if refusals else ""
    when = (
        "at once (wait_for_capacity is false)"
        if not options.wait_for_capacity
        else f"within {waited:.0f}s"
    )
    return f"no spread member had room {when}: {state}{why}"


def _cap(cap: int | None) -> str:
    return "no cap" if cap is None else str(cap)
