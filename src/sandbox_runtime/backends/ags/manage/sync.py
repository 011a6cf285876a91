"""Image -> tool sync for a whole dataset: one ACTIVE sandbox tool per image, and the mapping.

Training on AGS with one tool per image (how the seed recipes run SWE-bench and R2E-Gym)
needs thousands of tools made once, before training, and a file that tells every rollout
which tool serves its image.  :class:`ToolSync` does that, fixing what the seed's
``ags_tool_sync.py`` got wrong:

* **Resumable.**  One paged listing of the account's tools finds those made before (by their
  ``image`` tag, which the seed tool also set, so its tools are reused too); only missing
  images get a tool.  Re-running after a crash or on a grown dataset creates nothing twice.
* **Concurrent, bounded.**  Pushes and creations run on ``jobs`` threads; waiting until
  ACTIVE is one batched ``DescribeSandboxToolList`` per 100 tools per poll, not one per tool.
* **Retried safely.**  Each creation carries a ``ClientToken``, so the control client's
  retries after a lost answer return the tool the first attempt made; a create answered with
  ``ResourceInUse`` adopts the tool of that name if it carries our image tag.
* **Valid, unique names.**  ``<last path segment>-<tag>`` sanitised to ``[A-Za-z0-9_-]``;
  names longer than 50 characters, or shared by two images, or taken by someone else's
  tool, get a short hash of the image instead of their end, so a name is stable across runs.
* **Failures are reported, not fatal.**  A tool that turns FAILED (its ``StatusReason``
  included), an image that cannot be pushed, a name conflict: each is that image's outcome,
  and the mapping lists only ACTIVE tools.  The mapping is written atomically.

Nothing here knows datasets: callers pass image names (the CLI reads them from task files).
"""

from __future__ import annotations

import hashlib
import logging
import re
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import ValidationError

from sandbox_runtime.backends.ags._cloud import AgsApiError, AgsCloudClient
from sandbox_runtime.backends.ags._mapping import MappedTool, ToolMapping
from sandbox_runtime.errors import ConfigError, SandboxError, SandboxTimeoutError

from .registry import PushResult, RegistryPusher, split_reference
from .tools import (
    ToolInfo,
    ToolSettings,
    ToolSpec,
    get_tool,
    wait_for_tools,
)

__all__ = [
    "IMAGE_TAG",
    "MANAGED_TAG",
    "TARGET_TAG",
    "SyncEntry",
    "SyncReport",
    "ToolSync",
    "ToolTemplate",
    "assign_tool_names",
    "tool_name_for",
]

logger = logging.getLogger("sandbox_runtime.ags.sync")

#: Tag keys on synced tools (the first two are those ``ags_tool_sync.py`` wrote).
IMAGE_TAG = "image"
TARGET_TAG = "tcr_image"
MANAGED_TAG = ("managed-by", "sandbox-runtime")
_MAX_NAME = 50
_HASH = 8
_INVALID = re.compile(r"[^A-Za-z0-9_-]+")
_STATUS_RANK = {"ACTIVE": 0, "CREATING": 1}

Action = Literal["reuse", "create", "recreate"]


def _sanitize(text: str) -> str:
    return _INVALID.sub("-", text).strip("-") or "tool"


def _base_name(image: str) -> str:
    _registry, path, tag, digest = split_reference(image)
    last = path.rsplit("/", 1)[-1]
    if tag is None:
        tag = digest.split(":", 1)[-1][:12] if digest else "latest"
    return _sanitize(f"{last}-{tag}")


def _hashed(image: str) -> str:
    digest = hashlib.sha256(image.encode()).hexdigest()[:_HASH]
    head = _base_name(image)[: _MAX_NAME - _HASH - 1].rstrip("-")
    return f"{head}-{digest}"


def tool_name_for(image: str) -> str:
    """The tool name for ``image``: ``<last segment>-<tag>``, hashed when over 50 characters."""
    base = _base_name(image)
    return base if len(base) <= _MAX_NAME else _hashed(image)


def assign_tool_names(images: Sequence[str], taken: Iterable[str] = ()) -> dict[str, str]:
    """A unique valid name per image, avoiding ``taken``; the same input gives the same names.

    A base name shared by several images, or already taken, is replaced by its hashed form
    for every image concerned, so the result does not depend on the order of ``images``.
    """
    unavailable = set(taken)
    bases = {image: tool_name_for(image) for image in dict.fromkeys(images)}
    shared = Counter(bases.values())
    names: dict[str, str] = {}
    used: set[str] = set()
    for image, base in bases.items():
        name = base if shared[base] == 1 and base not in unavailable else _hashed(image)
        if name in unavailable or name in used:
            raise ConfigError(f"cannot find a free tool name for {image} (tried {name})")
        names[image] = name
        used.add(name)
    return names


class ToolTemplate(ToolSettings):
    """What every tool of a sync shares; names, images and tags are filled in per image.

    ``image_registry_type`` applies to images that are not pushed (a push sets its own);
    ``tags`` are extra tags on every tool (the sync's own tags win on conflict).
    """

    def spec(self, name: str, image: str, registry_type: str, tags: dict[str, str]) -> ToolSpec:
        """The full spec of one tool."""
        return ToolSpec.model_validate(
            {
                **self.model_dump(exclude={"tags", "image_registry_type"}),
                "name": name,
                "image": image,
                "image_registry_type": registry_type,
                "tags": {**self.tags, **tags},
                "description": f"sandbox-runtime sync of {image}"[:200],
            }
        )


@dataclass
class SyncEntry:
    """One image's outcome."""

    image: str
    tool_name: str
    action: Action
    target: str
    """The image reference the tool runs (the pushed copy, or ``image`` itself)."""
    status: str = "PLANNED"
    """The tool's status (ACTIVE, CREATING, FAILED), or PLANNED (dry run) or ERROR."""
    tool_id: str = ""
    reason: str = ""
    push: PushResult | None = None
    spec: ToolSpec | None = field(default=None, repr=False)
    replaces: str = ""
    """Id of a FAILED tool this entry deletes and recreates."""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready summary."""
        return {
            "image": self.image,
            "tool_name": self.tool_name,
            "tool_id": self.tool_id,
            "action": self.action,
            "target": self.target,
            "status": self.status,
            "reason": self.reason,
            "push": self.push.to_dict() if self.push else None,
        }


@dataclass
class SyncReport:
    """Every image's outcome and the mapping of those with an ACTIVE tool."""

    entries: list[SyncEntry]
    mapping: ToolMapping
    dry_run: bool
    out: Path | None = None

    @property
    def ok(self) -> bool:
        """True when every image has an ACTIVE tool (or, in a dry run, a plan)."""
        wanted = "PLANNED" if self.dry_run else "ACTIVE"
        return all(e.status in (wanted, "ACTIVE") for e in self.entries)

    def count(self, action: Action) -> int:
        """How many entries took ``action``."""
        return sum(1 for e in self.entries if e.action == action)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready summary."""
        return {
            "ok": self.ok,
            "dry_run": self.dry_run,
            "out": str(self.out) if self.out else None,
            "images": len(self.entries),
            "reused": self.count("reuse"),
            "created": self.count("create") + self.count("recreate"),
            "active": sum(1 for e in self.entries if e.status == "ACTIVE"),
            "entries": [e.to_dict() for e in self.entries],
        }


def _pick(candidates: list[ToolInfo]) -> ToolInfo:
    """The best of several tools for one image: ACTIVE, then CREATING, then the oldest."""
    return min(candidates, key=lambda t: (_STATUS_RANK.get(t.status, 2), t.created, t.tool_id))


class ToolSync:
    """Makes sure every image has an ACTIVE tool; see the module docstring."""

    def __init__(
        self,
        client: AgsCloudClient,
        template: ToolTemplate,
        *,
        jobs: int = 4,
        pusher: RegistryPusher | None = None,
        dry_run: bool = False,
        retry_failed: bool = False,
        wait_timeout: float = 1800.0,
        poll_interval: float = 2.0,
        log: Callable[[str], None] | None = None,
    ) -> None:
        self.client = client
        self.template = template
        self.jobs = max(1, jobs)
        self.pusher = pusher
        self.dry_run = dry_run
        self.retry_failed = retry_failed
        self.wait_timeout = wait_timeout
        self.poll_interval = poll_interval
        self._log = log or (lambda message: logger.info("%s", message))
        self._lock = threading.Lock()

    # -- planning ----------------------------------------------------------------------------

    def plan(self, images: Iterable[str]) -> list[SyncEntry]:
        """What to do for each image, from one paged listing of the account's tools."""
        wanted = list(dict.fromkeys(images))
        if not wanted:
            raise ConfigError("no image to sync")
        self._check_template()
        existing = [ToolInfo.from_api(t) for t in self.client.iter_tools()]
        by_image: dict[str, list[ToolInfo]] = {}
        for tool in existing:
            source = tool.tags.get(IMAGE_TAG)
            if source:
                by_image.setdefault(source, []).append(tool)
        entries: list[SyncEntry] = []
        to_name: list[str] = []
        for image in wanted:
            found = by_image.get(image)
            if found:
                tool = _pick(found)
                if tool.status != "FAILED" or not self.retry_failed:
                    entries.append(
                        SyncEntry(
                            image=image,
                            tool_name=tool.name,
                            action="reuse",
                            target=tool.tags.get(TARGET_TAG) or tool.image or image,
                            status=tool.status,
                            tool_id=tool.tool_id,
                            reason=tool.status_reason,
                        )
                    )
                    continue
                entries.append(
                    SyncEntry(image, tool.name, "recreate", image, replaces=tool.tool_id)
                )
                continue
            to_name.append(image)
            entries.append(SyncEntry(image, "", "create", image))
        names = assign_tool_names(to_name, taken={t.name for t in existing})
        for entry in entries:
            if entry.action == "create":
                entry.tool_name = names[entry.image]
        self._plan_pushes([e for e in entries if e.action != "reuse"])
        for entry in entries:
            if entry.action != "reuse" and entry.status != "ERROR":
                self._make_spec(entry)
        return entries

    def _registry_type(self) -> str:
        if self.pusher is not None:
            return self.pusher.target.image_registry_type
        return self.template.image_registry_type

    def _check_template(self) -> None:
        """Refuse a template every tool would fail with (a missing role ARN) before any call."""
        probe = self.template.spec("name-check", "example/image:1", self._registry_type(), {})
        probe.to_request()

    def _plan_pushes(self, entries: list[SyncEntry]) -> None:
        if self.pusher is None or not entries:
            return
        items = {item.source: item for item in self.pusher.plan(e.image for e in entries)}
        for entry in entries:
            item = items[entry.image]
            entry.target = item.target
            entry.push = PushResult(item, "planned")

    def _make_spec(self, entry: SyncEntry) -> None:
        registry_type = self._registry_type()
        tags = {IMAGE_TAG: entry.image, TARGET_TAG: entry.target, MANAGED_TAG[0]: MANAGED_TAG[1]}
        try:
            entry.spec = self.template.spec(entry.tool_name, entry.target, registry_type, tags)
            entry.spec.to_request()  # refuses a spec the service would refuse
        except (ValidationError, ConfigError) as exc:
            entry.status = "ERROR"
            entry.reason = f"invalid tool spec: {exc}"

    # -- doing -------------------------------------------------------------------------------

    def run(self, images: Iterable[str], out: Path | None = None) -> SyncReport:
        """Plan, then (unless a dry run) push, create, wait and write the mapping to ``out``."""
        return self.apply(self.plan(images), out)

    def apply(self, entries: list[SyncEntry], out: Path | None = None) -> SyncReport:
        """Carry out a plan from :meth:`plan` (nothing but the report in a dry run)."""
        if not self.dry_run:
            todo = [e for e in entries if e.action != "reuse" and e.status != "ERROR"]
            if todo:
                self._log(f"creating {len(todo)} tool(s) with {self.jobs} worker(s)")
                with ThreadPoolExecutor(self.jobs, thread_name_prefix="ags-sync") as pool:
                    list(pool.map(self._create_one, todo))
            self._wait(entries)
        mapping = ToolMapping(
            {
                e.image: MappedTool(tool_name=e.tool_name, tool_id=e.tool_id, tcr_image=e.target)
                for e in entries
                if e.status == "ACTIVE"
            }
        )
        if out is not None and not self.dry_run:
            mapping.write(out)
            self._log(f"wrote {len(mapping)} image(s) to {out}")
        return SyncReport(entries, mapping, self.dry_run, out if not self.dry_run else None)

    def _create_one(self, entry: SyncEntry) -> None:
        try:
            if entry.push is not None and self.pusher is not None:
                entry.push = self.pusher.push(entry.push.item)
                if entry.push.status == "failed":
                    entry.status, entry.reason = "ERROR", entry.push.error
                    return
                self._log(f"{entry.push.status} {entry.push.item.target}")
            if entry.replaces:
                self._delete_failed(entry)
            assert entry.spec is not None
            entry.tool_id = self._create(entry, entry.spec)
            entry.status = "CREATING"
            self._log(f"creating tool {entry.tool_name} ({entry.tool_id}) for {entry.image}")
        except SandboxError as exc:  # the Cloud API, the registry, a name conflict, a timeout
            entry.status, entry.reason = "ERROR", str(exc)
            self._log(f"error: {entry.image}: {exc}")

    def _create(self, entry: SyncEntry, spec: ToolSpec) -> str:
        request = spec.to_request(client_token=uuid.uuid4().hex)
        try:
            return self.client.create_tool(request)
        except AgsApiError as exc:
            if exc.code != "ResourceInUse.SandboxTool":
                raise
        # The name is taken: ours if it carries our image tag (made by a run that died
        # before it could list it), someone else's otherwise.
        holder = get_tool(self.client, spec.name)
        if holder.tags.get(IMAGE_TAG) == entry.image:
            return holder.tool_id
        raise ConfigError(
            f"tool name {spec.name} is taken by tool {holder.tool_id} "
            f"(image {holder.image or 'unknown'})"
        )

    def _delete_failed(self, entry: SyncEntry) -> None:
        """Delete the FAILED tool being replaced and wait until its name is free again."""
        try:
            self.client.delete_tool(entry.replaces)
        except AgsApiError as exc:
            if not exc.is_not_found:
                raise
        self._log(f"deleted FAILED tool {entry.tool_name} ({entry.replaces})")
        deadline = time.monotonic() + min(self.wait_timeout, 300.0)
        while time.monotonic() < deadline:
            remaining, _total = self.client.describe_tools(filters={"ToolName": [entry.tool_name]})
            if not any(t.get("ToolId") == entry.replaces for t in remaining):
                return
            time.sleep(self.poll_interval)
        raise SandboxTimeoutError(f"the FAILED tool {entry.replaces} was not deleted in time")

    def _wait(self, entries: list[SyncEntry]) -> None:
        waiting = {e.tool_id: e for e in entries if e.tool_id and e.status == "CREATING"}
        if not waiting:
            return
        self._log(f"waiting for {len(waiting)} tool(s) to become ACTIVE")

        def changed(info: ToolInfo) -> None:
            if info.status != "CREATING":
                self._log(f"tool {info.name}: {info.status} {info.status_reason}".rstrip())

        try:
            states = wait_for_tools(
                self.client,
                list(waiting),
                timeout=self.wait_timeout,
                poll_interval=self.poll_interval,
                on_change=changed,
            )
        except SandboxTimeoutError as exc:
            for entry in waiting.values():
                if entry.status == "CREATING":
                    entry.reason = str(exc)
            refreshed = self.client.describe_tools_by_id(list(waiting))
            states = {t.tool_id: t for t in map(ToolInfo.from_api, refreshed)}
        for tool_id, info in states.items():
            entry = waiting[tool_id]
            entry.status = info.status
            if info.status == "FAILED":
                entry.reason = info.status_reason or "FAILED without a reason"
