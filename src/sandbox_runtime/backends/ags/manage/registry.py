"""Push dataset images to a registry AGS can pull from: TCR Enterprise, CCR Personal, or any.

AGS instances only run images from Tencent's registries (or ``custom`` ones it can reach), so
images named by a dataset (Docker Hub's ``slimshetty/swebench-lite:...``, locally built ones)
are copied there first: pull if missing, tag, push, through the local Docker engine
(docker-py).  Before pushing, the TCR/CCR namespace and repository are created through the TCR
Cloud API if missing, and for TCR Enterprise a temporary login is fetched with
``CreateInstanceToken``.

Targets are written ``tcr:<registry-id>`` (domain from ``DescribeInstances``), ``ccr`` or
``ccr:<domain>``, or a plain ``host[:port]`` for any other registry.  An image ``org/name:tag``
goes to ``<domain>/<namespace>/<name>:<tag>``, where the namespace is ``--namespace`` or else
the image's own first path segment.  :meth:`RegistryPusher.plan` computes every target without
touching anything, which is what a dry run prints; an image already in the registry with the
same digest as the local one is not pushed again, so a re-run only pushes what is missing.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import SecretStr

from sandbox_runtime.backend_kit import (
    RetryPolicy,
    call_with_retries,
)
from sandbox_runtime.backends.ags._cloud import redact
from sandbox_runtime.errors import BackendError, BackendUnavailableError, ConfigError

__all__ = [
    "PushItem",
    "PushResult",
    "RegistryPushError",
    "RegistryPusher",
    "RegistryTarget",
    "plan_push",
    "push_all",
    "split_reference",
]

logger = logging.getLogger("sandbox_runtime.ags.registry")

CCR_DOMAIN = "ccr.ccs.tencentyun.com"
_NAMESPACE = re.compile(r"^[a-z0-9]+(?:[._-][a-z0-9]+)*$")
_PUSH_POLICY = RetryPolicy(attempts=4, max_delay=600.0, initial_wait=1.0, max_wait=20.0)
_TRANSIENT = (
    "timeout",
    "timed out",
    "connection reset",
    "connection refused",
    "broken pipe",
    "eof",
    "toomanyrequests",
    "502",
    "503",
    "504",
)

Kind = Literal["tcr", "ccr", "custom"]


class RegistryPushError(BackendError):
    """Pulling, tagging or pushing one image failed (after retries where they are safe)."""


def split_reference(ref: str) -> tuple[str | None, str, str | None, str | None]:
    """``registry, path, tag, digest`` of an image reference (``None`` for absent parts)."""
    name, _, digest = ref.partition("@")
    first, slash, rest = name.partition("/")
    registry = None
    if slash and ("." in first or ":" in first or first == "localhost"):
        registry, name = first, rest
    path, tag = name, None
    last = name.rsplit("/", 1)[-1]
    if ":" in last:
        path, _, tag = name.rpartition(":")
    return registry, path, tag, digest or None


@dataclass(frozen=True)
class RegistryTarget:
    """Where images go: the kind of registry, its domain, and an optional namespace."""

    kind: Kind
    domain: str
    registry_id: str | None = None
    namespace: str | None = None

    @classmethod
    def parse(cls, spec: str, namespace: str | None = None) -> RegistryTarget:
        """``tcr:<registry-id>``, ``ccr``, ``ccr:<domain>`` or ``host[:port]``."""
        if namespace is not None and not _NAMESPACE.match(namespace):
            raise ConfigError(f"invalid namespace {namespace!r}: lower-case letters, digits, . _ -")
        if spec.startswith("tcr:"):
            registry_id = spec[4:]
            if not registry_id:
                raise ConfigError("tcr:<registry-id> needs the TCR instance id (tcr-xxxxxxxx)")
            return cls("tcr", "", registry_id=registry_id, namespace=namespace)
        if spec == "ccr" or spec.startswith("ccr:"):
            return cls("ccr", spec[4:] or CCR_DOMAIN, namespace=namespace)
        if not spec or "/" in spec or spec.startswith(("http://", "https://")):
            raise ConfigError(
                f"invalid registry {spec!r}: use tcr:<registry-id>, ccr[:<domain>] or host[:port]"
            )
        return cls("custom", spec, namespace=namespace)

    @property
    def image_registry_type(self) -> str:
        """AGS's ``ImageRegistryType`` for images in this registry."""
        return {"tcr": "enterprise", "ccr": "personal", "custom": "custom"}[self.kind]

    def describe(self) -> str:
        """The target as the user wrote it, for messages."""
        if self.kind == "tcr":
            where = f"TCR {self.registry_id}" + (f" ({self.domain})" if self.domain else "")
        else:
            where = f"{'CCR' if self.kind == 'ccr' else 'registry'} {self.domain}"
        return where + (f", namespace {self.namespace}" if self.namespace else "")


@dataclass(frozen=True)
class PushItem:
    """One image to copy: from ``source`` (as the dataset names it) to ``target``."""

    source: str
    target: str
    namespace: str
    repository: str
    tag: str

    @property
    def target_repo(self) -> str:
        """``target`` without its tag."""
        return self.target.rsplit(":", 1)[0]


@dataclass
class PushResult:
    """What happened to one :class:`PushItem`."""

    item: PushItem
    status: Literal["pushed", "present", "planned", "failed"]
    digest: str = ""
    error: str = ""

    def to_dict(self) -> dict[str, str]:
        """A JSON-ready summary."""
        return {
            "source": self.item.source,
            "target": self.item.target,
            "status": self.status,
            "digest": self.digest,
            "error": self.error,
        }


def plan_push(images: Iterable[str], target: RegistryTarget) -> list[PushItem]:
    """Every image's target reference; :class:`ConfigError` if two images would collide.

    Pure: computes names only (``target.domain`` must be known, see
    :meth:`RegistryPusher.resolve`).
    """
    if not target.domain:
        raise ConfigError(f"the domain of {target.describe()} is not known yet")
    items: list[PushItem] = []
    claimed: dict[str, str] = {}
    for source in dict.fromkeys(images):
        _registry, path, tag, digest = split_reference(source)
        segments = path.split("/")
        if target.namespace:
            namespace, repository = target.namespace, segments[-1]
        elif len(segments) == 1:
            namespace, repository = "library", segments[0]
        else:
            namespace = segments[0]
            repository = segments[-1] if target.kind == "ccr" else "/".join(segments[1:])
        if not (2 <= len(namespace) <= 30 and _NAMESPACE.match(namespace)):
            raise ConfigError(
                f"image {source}: {namespace!r} is not a valid TCR namespace "
                "(2-30 of a-z 0-9 . _ -); choose one with --namespace"
            )
        if tag is None:
            tag = f"sha256-{digest.split(':', 1)[-1][:16]}" if digest else "latest"
        ref = f"{target.domain}/{namespace}/{repository}:{tag}"
        if ref in claimed and claimed[ref] != source:
            raise ConfigError(
                f"images {claimed[ref]} and {source} would both be pushed as {ref}; "
                "push them with different namespaces"
            )
        claimed[ref] = source
        items.append(PushItem(source, ref, namespace, repository, tag))
    return items


def _is_transient(exc: BaseException) -> bool:
    text = str(exc).lower()
    return isinstance(exc, RegistryPushError) and any(word in text for word in _TRANSIENT)


class RegistryPusher:
    """Copies images into one registry; see the module docstring.

    ``tcr`` (a :class:`~.tcr.TcrCloudClient`) is needed for ``tcr:`` and
    ``ccr`` targets, to create namespaces and repositories and, for TCR, to log in.
    ``username``/``password`` log in to CCR (its password is the one set in the console) or
    to a custom registry.  ``docker_client`` defaults to the local engine.
    """

    def __init__(
        self,
        target: RegistryTarget,
        *,
        tcr: Any = None,
        username: str | None = None,
        password: SecretStr | None = None,
        docker_client: Any = None,
        internal: bool = False,
        pull: bool = True,
        force: bool = False,
    ) -> None:
        if target.kind in ("tcr", "ccr") and tcr is None:
            raise ConfigError(f"{target.describe()} needs TCR Cloud API credentials")
        self.target = target
        self.tcr = tcr
        self.username = username
        self.password = password
        self.internal = internal
        self.pull = pull
        self.force = force
        self._docker = docker_client
        self._auth: dict[str, str] | None = None
        self._ensured: set[str] = set()
        self._login_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"RegistryPusher({self.target.describe()})"

    # -- planning (read-only) ----------------------------------------------------------------

    def resolve(self) -> RegistryTarget:
        """The target with its domain known (TCR: ``DescribeInstances``; read-only)."""
        if self.target.kind == "tcr" and not self.target.domain:
            assert self.target.registry_id is not None
            instance = self.tcr.describe_instance(self.target.registry_id)
            if instance.status not in ("Running", ""):
                raise BackendUnavailableError(
                    f"TCR instance {instance.registry_id} is {instance.status}, not Running"
                )
            domain = instance.internal_endpoint if self.internal else instance.public_domain
            if not domain:
                raise BackendError(f"TCR instance {instance.registry_id} reports no domain")
            self.target = RegistryTarget(
                "tcr", domain, registry_id=instance.registry_id, namespace=self.target.namespace
            )
        return self.target

    def plan(self, images: Iterable[str]) -> list[PushItem]:
        """Every image's target (see :func:`plan_push`); resolves the domain first."""
        return plan_push(images, self.resolve())

    # -- changes -----------------------------------------------------------------------------

    def _client(self) -> Any:
        if self._docker is None:
            try:
                import docker
            except ImportError as exc:
                raise BackendUnavailableError(
                    "pushing images needs docker-py: pip install 'sandbox-runtime-swe[docker]'"
                ) from exc
            try:
                self._docker = docker.from_env(timeout=600)
                self._docker.ping()
            except docker.errors.DockerException as exc:
                raise BackendUnavailableError(f"no Docker engine to push with: {exc}") from exc
        return self._docker

    def _secrets(self) -> list[str]:
        values = [self.password.get_secret_value()] if self.password is not None else []
        if self._auth is not None:
            values.append(self._auth["password"])
        return values

    def prepare(self, items: Iterable[PushItem]) -> None:
        """Create missing namespaces/repositories (TCR, CCR) and log in; safe to repeat."""
        target = self.resolve()
        for item in items:
            key = f"{item.namespace}/{item.repository}"
            if key in self._ensured:
                continue
            if target.kind == "tcr":
                assert target.registry_id is not None
                if self.tcr.ensure_namespace(target.registry_id, item.namespace):
                    logger.info("created TCR namespace %s", item.namespace)
                if self.tcr.ensure_repository(target.registry_id, item.namespace, item.repository):
                    logger.info("created TCR repository %s", key)
            elif target.kind == "ccr":
                if self.tcr.ensure_namespace_personal(item.namespace):
                    logger.info("created CCR namespace %s", item.namespace)
                if self.tcr.ensure_repository_personal(key):
                    logger.info("created CCR repository %s", key)
            self._ensured.add(key)
        self._login()

    def _login(self) -> None:
        with self._login_lock:
            if self._auth is None:
                self._auth = self._log_in()

    def _log_in(self) -> dict[str, str] | None:
        target = self.target
        if target.kind == "tcr":
            assert target.registry_id is not None
            token = self.tcr.create_token(target.registry_id)
            username, password = token.username, token.password.get_secret_value()
        elif self.username and self.password is not None:
            username, password = self.username, self.password.get_secret_value()
        else:
            if target.kind == "ccr":
                raise ConfigError(
                    "CCR needs a docker login: --registry-username (your account id) and the "
                    "password from the console in TCR_PASSWORD"
                )
            return None  # a custom registry that needs no login
        auth = {"username": username, "password": password}
        try:
            self._client().login(username, password, registry=target.domain, reauth=True)
        except Exception as exc:
            raise RegistryPushError(
                f"docker login to {target.domain} failed: "
                f"{redact(str(exc), [password, *self._secrets()])}"
            ) from exc
        return auth

    def _present(self, item: PushItem) -> str | None:
        """The registry's digest if it already holds this image (same digest as ours)."""
        client = self._client()
        import docker

        try:
            remote = client.api.inspect_distribution(item.target, auth_config=self._auth)
        except docker.errors.APIError:
            return None  # not there, or not readable: push
        digest = str((remote.get("Descriptor") or {}).get("digest", ""))
        try:
            local = client.images.get(item.source)
        except docker.errors.ImageNotFound:
            return digest  # nothing local to compare with: the registry's copy stands
        repo_digests = local.attrs.get("RepoDigests") or []
        return digest if f"{item.target_repo}@{digest}" in repo_digests else None

    def push(self, item: PushItem) -> PushResult:
        """Pull (if missing), tag and push one image; skipped if the registry has it."""
        if item.namespace + "/" + item.repository not in self._ensured:
            self.prepare([item])
        if not self.force:
            digest = self._present(item)
            if digest:
                return PushResult(item, "present", digest=digest)
        try:
            self._ensure_local(item.source)
            self._tag(item)
            digest = call_with_retries(
                lambda: self._push_once(item),
                _is_transient,
                description=f"push {item.target}",
                policy=_PUSH_POLICY,
            )
        except RegistryPushError as exc:
            return PushResult(item, "failed", error=str(exc))
        return PushResult(item, "pushed", digest=digest)

    def _ensure_local(self, source: str) -> None:
        client = self._client()
        import docker

        try:
            client.images.get(source)
            return
        except docker.errors.ImageNotFound:
            if not self.pull:
                raise RegistryPushError(f"image {source} is not present locally") from None
        _registry, _path, tag, digest = split_reference(source)
        repository = source.split("@", 1)[0]
        if tag is not None:
            repository = repository.rsplit(":", 1)[0]

        def pull() -> None:
            try:
                client.api.pull(repository, tag=digest or tag or "latest")
            except docker.errors.APIError as exc:
                raise RegistryPushError(f"pulling {source} failed: {exc.explanation}") from exc

        call_with_retries(pull, _is_transient, description=f"pull {source}", policy=_PUSH_POLICY)

    def _tag(self, item: PushItem) -> None:
        client = self._client()
        import docker

        try:
            client.api.tag(item.source, item.target_repo, tag=item.tag)
        except docker.errors.APIError as exc:
            raise RegistryPushError(f"tagging {item.source} failed: {exc.explanation}") from exc

    def _push_once(self, item: PushItem) -> str:
        client = self._client()
        import docker

        digest = ""
        try:
            stream: Iterable[dict[str, Any]] = client.api.push(
                item.target_repo, tag=item.tag, stream=True, decode=True, auth_config=self._auth
            )
            for line in stream:
                if "error" in line:
                    detail = redact(str(line.get("error")), self._secrets())
                    raise RegistryPushError(f"pushing {item.target} failed: {detail}")
                aux = line.get("aux") or {}
                if aux.get("Digest"):
                    digest = str(aux["Digest"])
        except docker.errors.APIError as exc:
            detail = redact(str(exc.explanation), self._secrets())
            raise RegistryPushError(f"pushing {item.target} failed: {detail}") from exc
        except OSError as exc:  # the engine's connection broke mid-stream
            raise RegistryPushError(f"pushing {item.target} failed: {exc}") from exc
        return digest


def push_all(
    pusher: RegistryPusher,
    items: list[PushItem],
    *,
    on_result: Callable[[PushResult], None] | None = None,
) -> list[PushResult]:
    """Push items one after the other (the engine parallelises layers itself)."""
    pusher.prepare(items)
    results = []
    for item in items:
        result = pusher.push(item)
        if on_result is not None:
            on_result(result)
        results.append(result)
    return results
