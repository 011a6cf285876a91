"""The ``kubernetes`` backend: one pod per sandbox, through the official ``kubernetes`` client.

Lifetime without a babysitter: the container's command is ``sleep <lifetime>`` and the pod
has ``activeDeadlineSeconds`` = lifetime, so an abandoned sandbox ends at its lifetime even if
the client was ``kill -9``ed; ended pods and pods of dead owners are deleted by
:meth:`KubernetesBackend.reap` (``sandbox-runtime reap``), which selects only pods carrying
this library's labels.

Commands run through ``pods/exec`` (what ``kubectl exec`` uses).  That API has no working
directory, environment or kill, so each command runs under ``env`` and the wrapper of
``_shell`` (cd, then eval), and a timeout kills the command's process group with a second
exec.  Files move as tar streams through exec, as ``kubectl cp`` does.  Where the pod's IP
routes from here (in the cluster, or a local one), the in-sandbox agent
(:mod:`sandbox_runtime._envd.agent`) serves both once it answers.
"""

from __future__ import annotations

import calendar
import contextlib
import logging
import secrets
import time
import uuid
from collections.abc import Mapping
from typing import Any

from sandbox_runtime.backend_kit import (
    MANAGED,
    TOKEN_VAR,
    Availability,
    Backend,
    BackendOptions,
    Capability,
    Checkpoint,
    ExecRequest,
    ExecResult,
    HeadTailBuffer,
    RateLimiter,
    ReapedSandbox,
    RetryPolicy,
    SandboxConfig,
    SandboxInfo,
    call_with_retries,
    check_cwd,
    kill_group_script,
    limiter_for,
    new_lease_key,
    new_token,
    shell_text,
    why_reapable,
    wrapped_argv,
    write_end_script,
)
from sandbox_runtime.backend_kit.agent import (
    AgentLink,
    AgentRouting,
    agent_archive,
    agent_can_run,
    agent_directory,
    agent_state_command,
    fallback_directory,
)
from sandbox_runtime.errors import (
    BackendError,
    BackendUnavailableError,
    CheckpointNotFoundError,
    ConfigError,
    QuotaExceededError,
    SandboxError,
    SandboxFileNotFoundError,
    SandboxGoneError,
    SandboxStartError,
    SandboxTimeoutError,
)

from . import _lease
from ._checkpoints import store_for
from ._client import (
    ApiException,
    Cluster,
    connect,
    describe,
    handshake_refused,
    read_json,
    retry_after,
    retryable,
    status_code,
    unreachable,
)
from ._exec import V5_PROTOCOL, ExecOutcome, bounded_stdin, open_exec, run_exec
from ._labels import (
    BACKEND_KEY,
    MANAGED_SELECTOR,
    full_labels,
    key_for,
    ownership_view,
    pod_metadata,
)
from ._options import KubernetesOptions
from ._snapshots import (
    CLAIM_VOLUME,
    POD_KEY,
    SnapshotCalls,
    checkpoint_of,
    claim_manifest,
    is_snapshot_id,
    snapshot_class,
    snapshot_manifest,
)

__all__ = ["KubernetesBackend"]

logger = logging.getLogger("sandbox_runtime.kubernetes")

CONTAINER = "sandbox"
#: Waiting reasons after which a pod will not start without someone changing something.
_FATAL_WAITING = frozenset(
    {
        "ErrImagePull",
        "ImagePullBackOff",
        "ErrImageNeverPull",
        "InvalidImageName",
        "CreateContainerConfigError",
        "CreateContainerError",
        "RunContainerError",
        "CrashLoopBackOff",
    }
)
_NO_SUCH_PATH_EXIT = 44
_UNLIMITED = 1 << 62
_FILE_TIMEOUT = 3600.0
#: Age after which a workdir claim without its pod is debris (its start failed half-way).
_ORPHAN_CLAIM_AGE = 600.0


def _explain_refusal(exc: BaseException, cluster: Cluster, verb: str) -> SandboxError:
    """Map an API error at ``verb`` to this library's error, naming what to fix."""
    code = status_code(exc)
    if unreachable(exc):
        return BackendUnavailableError(
            f"cannot reach the Kubernetes API server at {cluster.server}: {describe(exc)}"
        )
    if code == 401:
        return BackendUnavailableError(
            f"the Kubernetes API server at {cluster.server} rejected the credentials "
            "(401 Unauthorized): check the kubeconfig user or the token option"
        )
    if code == 403:
        return BackendUnavailableError(
            f"not allowed to {verb} in namespace {cluster.namespace!r} (403 Forbidden): "
            f"{describe(exc)}; see docs/kubernetes.md for the RBAC rules the backend needs"
        )
    return BackendError(f"{verb} failed: {describe(exc)}")


def _quota_refusal(exc: ApiException) -> bool:
    """A create refused for quota: 429 after the retries, or a ResourceQuota's 403."""
    code = status_code(exc)
    return code == 429 or (code == 403 and "exceeded quota" in describe(exc))


#: Sending an exec again whose upgrade was refused: a handful of tries, bounded in time.
_EXEC_OPEN_POLICY = RetryPolicy(attempts=6, max_delay=30.0)


def _small_buffers() -> tuple[HeadTailBuffer, HeadTailBuffer]:
    """Capture for the backend's own short commands (probes, kills)."""
    return HeadTailBuffer(4096), HeadTailBuffer(4096)


def _limiter(cluster: Cluster, options: KubernetesOptions) -> RateLimiter:
    """The API server's limiter: one per server in this process (shared by every sandbox)."""
    return limiter_for(f"kubernetes:{cluster.server}", options.api_qps, options.api_burst)


class KubernetesBackend(AgentRouting, Backend[KubernetesOptions]):
    """A sandbox as a Kubernetes pod; see the module docstring."""

    name = "kubernetes"
    options_model = KubernetesOptions
    extra = "kubernetes"
    #: Pods run images the nodes can pull; with the emulator or a one-node cluster on this
    #: machine's engine (``imagePullPolicy: IfNotPresent``) that includes locally built ones.
    #: Filesystem checkpoints and forks through CSI volume snapshots (``_snapshots.py``)
    #: where the cluster has a snapshot class, else through the archive store
    #: (``_checkpoints.py``);
    #: no ``pause``: the pods API has no freezer (``docs/checkpoints.md``).
    capabilities = frozenset(
        {
            Capability.ENGINE_IMAGES,
            Capability.RECONNECT,
            Capability.STREAMING,
            Capability.CHECKPOINT_FILESYSTEM,
            Capability.FORK,
            Capability.EXTEND_LIFETIME,
        }
    )

    def __init__(self, config: SandboxConfig, options: KubernetesOptions) -> None:
        super().__init__(config, options)
        self._pod = options.name_prefix + uuid.uuid4().hex[:16]
        self._lease_key = new_lease_key()
        self._cluster: Cluster | None = None
        self._started = False
        self._shell = "bash"
        self._close_stdin = True  # the v5 close signal; learnt from the first exec
        self._pod_ip: str | None = None
        self._agent_dir = agent_directory()
        # The snapshot path (``_snapshots``): the workdir's claim, the snapshot class, whether
        # a fresh claim is seeded with the image's workdir, and the snapshot a fork restores.
        self._claim: str | None = None
        self._snapshot_class: str | None = None
        self._method_chosen = False
        self._seed = True
        self._restore_from: dict[str, Any] | None = None

    def __repr__(self) -> str:
        return f"KubernetesBackend(pod={self._pod!r})"

    @classmethod
    def availability(cls, options: BackendOptions | None = None) -> Availability:
        """Load the configuration and list one pod: reachable, authenticated, allowed."""
        opts = cls.coerce_options(options)
        try:
            cluster = connect(opts)
        except BackendUnavailableError as exc:
            return Availability(False, str(exc))
        try:
            cluster.api.list_namespaced_pod(
                cluster.namespace, limit=1, _preload_content=False, _request_timeout=10
            )
        except Exception as exc:  # every failure here is a reason to report, not to raise
            return Availability(False, str(_explain_refusal(exc, cluster, "list pods")))
        return Availability(True)

    @property
    def sandbox_id(self) -> str:
        """The pod name (chosen before it is created, so a retried create finds it)."""
        return self._pod

    @property
    def cluster(self) -> Cluster:
        """The configured client (connects on first use)."""
        if self._cluster is None:
            self._cluster = connect(self.options)
        return self._cluster

    def _call(self, description: str, operation: Any) -> Any:
        return call_with_retries(
            operation,
            retryable,
            description=description,
            retry_after=retry_after,
            limiter=_limiter(self.cluster, self.options),
        )

    # -- lifecycle -------------------------------------------------------------------------

    def _manifest(self) -> dict[str, Any]:
        config, opts = self.config, self.options
        labels, annotations = pod_metadata(
            lifetime=config.lifetime,
            run_id=config.run_id,
            user_labels=config.labels,
            workdir=config.workdir,
        )
        resources: dict[str, str] = {}
        if config.resources.cpus:
            resources["cpu"] = f"{max(1, round(config.resources.cpus * 1000))}m"
        if config.resources.memory:
            resources["memory"] = str(config.resources.memory)
        container: dict[str, Any] = {
            "name": CONTAINER,
            "image": config.image,
            "imagePullPolicy": opts.image_pull_policy,
            "command": _lease.container_command(
                config,
                self._lease_key,
                None if opts.agent == "off" else self._agent_dir,
                fallback_directory(self._agent_dir),
            ),
            "workingDir": config.workdir,
            "env": [{"name": k, "value": v} for k, v in config.env.items()],
            "resources": {"requests": resources, "limits": resources} if resources else {},
        }
        spec: dict[str, Any] = {
            "restartPolicy": "Never",
            "activeDeadlineSeconds": _lease.deadline_seconds(config),
            "terminationGracePeriodSeconds": 0,
            "automountServiceAccountToken": opts.automount_service_account_token,
            "enableServiceLinks": False,
            "containers": [container],
        }
        if opts.service_account:
            spec["serviceAccountName"] = opts.service_account
        if opts.node_selector:
            spec["nodeSelector"] = dict(opts.node_selector)
        if opts.runtime_class_name:
            spec["runtimeClassName"] = opts.runtime_class_name
        if opts.image_pull_secrets:
            spec["imagePullSecrets"] = [{"name": name} for name in opts.image_pull_secrets]
        labels[_lease.LEASE_KEY] = self._lease_key
        if self._claim is not None:
            self._mount_claim(spec, container)
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": self._pod, "labels": labels, "annotations": annotations},
            "spec": spec,
        }

    def _mount_claim(self, spec: dict[str, Any], container: dict[str, Any]) -> None:
        """The workdir on its claim; a fresh claim is first seeded with the image's workdir.

        The seed is an init container of the same image with the claim mounted aside: it
        copies what the image has at the workdir (a repository, say), which the claim mounted
        there would hide.  A claim restored from a snapshot already holds its files.
        """
        assert self._claim is not None
        spec["volumes"] = [
            {"name": CLAIM_VOLUME, "persistentVolumeClaim": {"claimName": self._claim}}
        ]
        container["volumeMounts"] = [{"name": CLAIM_VOLUME, "mountPath": self.config.workdir}]
        if self._seed:
            seed = "/.sandbox-runtime-seed"
            spec["initContainers"] = [
                {
                    "name": "seed",
                    "image": container["image"],
                    "imagePullPolicy": container["imagePullPolicy"],
                    "command": [
                        "/bin/sh",
                        "-c",
                        'if [ -d "$1" ]; then cp -a "$1/." "$2/"; fi',
                        "sh",
                        self.config.workdir,
                        seed,
                    ],
                    "resources": container["resources"],
                    "volumeMounts": [{"name": CLAIM_VOLUME, "mountPath": seed}],
                }
            ]

    def _choose_method(self) -> None:
        """Take the snapshot path where it can be had (``checkpoint_method``), once."""
        if self._method_chosen:
            return
        self._method_chosen = True
        opts = self.options
        if opts.checkpoint_method == "archive":
            return
        if self.config.checkpoint_paths:
            if opts.checkpoint_method == "snapshot":
                raise ConfigError(
                    "options.checkpoint_method 'snapshot' keeps the workdir only; "
                    "checkpoint_paths need 'archive' (or 'auto')"
                )
            return
        try:
            self._snapshot_class = snapshot_class(self.cluster, opts)
        except ApiException as exc:
            raise _explain_refusal(exc, self.cluster, "list volumesnapshotclasses") from exc
        if self._snapshot_class is None and opts.checkpoint_method == "snapshot":
            raise ConfigError(
                f"options.checkpoint_method is 'snapshot' but {self.cluster.server} serves no "
                "usable VolumeSnapshotClass (snapshot.storage.k8s.io/v1)"
            )

    def _snapshots(self) -> SnapshotCalls:
        return SnapshotCalls(self.cluster, self.options, self._call)

    def _create_claim(self, name: str) -> None:
        manifest = claim_manifest(
            name, self._pod, self._manifest()["metadata"], self.options, self._restore_from
        )
        try:
            self._snapshots().create_claim(manifest)
        except ApiException as exc:
            error = _explain_refusal(exc, self.cluster, "create persistentvolumeclaims")
            if _quota_refusal(exc):
                error = QuotaExceededError(f"the API server refused the claim: {describe(exc)}")
            raise error from exc

    def start(self) -> None:
        """Create the pod, wait until it runs, prepare the workdir; clean up on any failure."""
        if not self.config.image:
            raise SandboxStartError("the kubernetes backend needs an image (SandboxConfig.image)")
        if any(name.startswith("-") for name in self.config.env):
            raise ConfigError("environment variable names may not start with '-'")
        began = time.monotonic()
        self._choose_method()
        cluster = self.cluster
        if self._snapshot_class is not None:
            self._create_claim(self._pod)
            self._claim = self._pod
        manifest = self._manifest()
        try:
            self._create(cluster, manifest)
        except ApiException as exc:
            error = _explain_refusal(exc, cluster, "create pods")
            if status_code(exc) in (400, 422):
                error = SandboxStartError(f"the API server refused the pod: {describe(exc)}")
            if _quota_refusal(exc):
                error = QuotaExceededError(f"the API server refused the pod: {describe(exc)}")
            self._delete_claim_quietly()
            raise error from exc
        except Exception as exc:
            if unreachable(exc):
                # The last attempt may have gone through unanswered: delete what may exist.
                self._started = True
                self._delete_quietly()
                raise _explain_refusal(exc, cluster, "create pods") from exc
            raise
        self._started = True
        try:
            self._wait_running(cluster, began + self.config.start_timeout)
            self.start_pulls += self._pulls(cluster)
            self._prepare(began + self.config.start_timeout)
            if self.options.agent != "off":
                link = self._start_agent()
                if self.options.agent == "on":
                    link.wait()  # "on": usable only through the agent
        except BaseException:
            self._delete_quietly()
            raise

    # -- checkpoints (docs/checkpoints.md) ---------------------------------------------------

    def checkpoint(self, labels: Mapping[str, str], lifetime: float) -> Checkpoint:
        """A ``VolumeSnapshot`` of the workdir's claim, or an archive of the captured paths.

        The snapshot path keeps the workdir on a claim; otherwise the workdir and
        ``config.checkpoint_paths`` are archived into the client's store.
        """
        if self._claim is not None and self._snapshot_class is not None:
            manifest = snapshot_manifest(
                claim=self._claim,
                class_name=self._snapshot_class,
                source_id=self._pod,
                image=self.config.image,
                labels=labels,
                lifetime=lifetime,
                run_id=self.config.run_id,
                workdir=self.config.workdir,
            )
            calls = self._snapshots()
            try:
                calls.create(manifest)
                taken = calls.wait_taken(manifest["metadata"]["name"], self.config.start_timeout)
            except ApiException as exc:
                raise _explain_refusal(exc, self.cluster, "create volumesnapshots") from exc
            return checkpoint_of(taken)
        return store_for(self.options).capture(
            self,
            [self.config.workdir, *self.config.checkpoint_paths],
            backend_name=self.name,
            source_id=self._pod,
            image=self.config.image,
            labels=labels,
            lifetime=lifetime,
            run_id=self.config.run_id,
            workdir=self.config.workdir,
        )

    def rollback(self, checkpoint: Checkpoint) -> None:
        """Restore the captured paths in this same pod (its commands keep running).

        A snapshot checkpoint is restored as a new claim, and the pod is replaced by one of
        the same name mounting it: its processes end (``docs/checkpoints.md``).
        """
        if not is_snapshot_id(checkpoint.id):
            store_for(self.options).restore(self, checkpoint)
            return
        calls = self._snapshots()
        self._restore_from = calls.get(checkpoint.id)
        old, new = self._claim, f"{self._pod}-{secrets.token_hex(3)}"
        self._create_claim(new)
        self._replace_pod(new)
        if old is not None:
            self._delete_claim_quietly(old)

    def _replace_pod(self, claim: str) -> None:
        """Delete the pod, then start one of the same name on ``claim`` (no seed)."""
        deadline = time.monotonic() + self.config.start_timeout
        cluster = self.cluster
        self.stop(keep_claim=True)
        self._agent = None
        delay = 0.05
        while self._read(cluster) is not None:
            if time.monotonic() + delay > deadline:
                raise SandboxTimeoutError(f"pod {self._pod} was not deleted within start_timeout")
            time.sleep(delay)
            delay = min(delay * 1.5, 1.0)
        self._claim, self._seed = claim, False
        try:
            self._create(cluster, self._manifest())
            self._wait_running(cluster, deadline)
            self._prepare(deadline)
            if self.options.agent != "off":
                link = self._start_agent()
                if self.options.agent == "on":
                    link.wait()
        except ApiException as exc:
            raise _explain_refusal(exc, cluster, "create pods") from exc

    def start_from_checkpoint(self, checkpoint: Checkpoint) -> None:
        """Start a fresh pod of the checkpoint's image (unless one is given), then restore.

        A snapshot checkpoint needs no restore: the pod's claim is made from the snapshot.
        """
        if is_snapshot_id(checkpoint.id):
            snapshot = self._snapshots().get(checkpoint.id)
            meta = snapshot["metadata"]
            if not self.config.image:
                image = (meta.get("annotations") or {}).get("sandbox-runtime.io/image")
                self.config = self.config.model_copy(update={"image": image or None})
            self._method_chosen, self._seed = True, False
            self._snapshot_class = snapshot["spec"].get(
                "volumeSnapshotClassName"
            ) or snapshot_class(self.cluster, self.options)
            self._restore_from = snapshot
            self.start()
            return
        store = store_for(self.options)
        record = store.record(checkpoint, self.name)
        if not self.config.image:
            self.config = self.config.model_copy(update={"image": record.image})
        self.start()
        try:
            store.restore(self, checkpoint)
        except BaseException:
            self._delete_quietly()
            raise

    @classmethod
    def _class_calls(cls, opts: KubernetesOptions) -> SnapshotCalls:
        cluster = connect(opts)

        def call(description: str, operation: Any) -> Any:
            return call_with_retries(
                operation,
                retryable,
                description=description,
                retry_after=retry_after,
                limiter=_limiter(cluster, opts),
            )

        return SnapshotCalls(cluster, opts, call)

    @classmethod
    def list_checkpoints(cls, options: BackendOptions | None = None) -> list[Checkpoint]:
        """The client's archive checkpoints, and the namespace's ``VolumeSnapshot`` ones."""
        opts = cls.coerce_options(options)
        found = store_for(opts).list(cls.name)
        if opts.checkpoint_method == "archive":
            return found
        try:
            calls = cls._class_calls(opts)
        except BackendUnavailableError as exc:  # no cluster configured: the archives still list
            logger.warning("kubernetes snapshot checkpoints not listed: %s", exc)
            return found
        return found + [checkpoint_of(item) for item in calls.list_snapshots()]

    @classmethod
    def delete_checkpoint(cls, checkpoint_id: str, options: BackendOptions | None = None) -> None:
        """Remove one checkpoint: its ``VolumeSnapshot``, or its archive in the client's store."""
        opts = cls.coerce_options(options)
        if is_snapshot_id(checkpoint_id):
            cls._class_calls(opts).delete(checkpoint_id)
            return
        store_for(opts).delete(checkpoint_id, cls.name)

    def _start_agent(self) -> AgentLink:
        """Upload the agent's files (one exec) off the start path; the pod's loop starts it."""
        token = secrets.token_urlsafe(24)
        self._agent = link = AgentLink(
            mode=self.options.agent,
            token=token,
            address=lambda: self._pod_ip,
            is_alive=self.is_alive,
            name=f"pod {self._pod}",
            wait=self.options.agent_wait,
            image=f"{self.name}|{self.engine_key(self.options)}|{self.config.image}",
            kill_command=self._kill_carriers,
            agent_running=self._agent_running,
        )
        link.start(lambda: self._put_agent(token))
        return link

    def _put_agent(self, token: str) -> None:
        """The agent's files in its own directory, or where a non-root pod's user can write.

        ``tar`` runs as the pod's user, who may not create the directory under ``/``; the pod's
        starter watches both places (see :func:`fallback_directory`).
        """
        try:
            self._native_put_archive(agent_archive(token, self._agent_dir))
        except BackendError:
            self._agent_dir = fallback_directory(self._agent_dir)
            self._native_put_archive(agent_archive(token, self._agent_dir))

    def _create(self, cluster: Cluster, manifest: dict[str, Any]) -> None:
        def create() -> None:
            try:
                cluster.api.create_namespaced_pod(
                    cluster.namespace,
                    manifest,
                    _preload_content=False,
                    _request_timeout=self.options.api_timeout,
                )
            except ApiException as exc:
                # 409 for our own random name: an earlier attempt went through, answer lost.
                if status_code(exc) == 409 and self._is_ours(cluster):
                    return
                raise

        self._call("create pod", create)

    def _is_ours(self, cluster: Cluster) -> bool:
        pod = self._read(cluster)
        if pod is None:
            return False
        mine = self._manifest()["metadata"]["annotations"]
        theirs = (pod.get("metadata") or {}).get("annotations") or {}
        keys = [key_for("sandbox-runtime.owner-pid"), key_for("sandbox-runtime.owner-start")]
        return all(theirs.get(key) == mine.get(key) for key in keys)

    def _read(self, cluster: Cluster) -> dict[str, Any] | None:
        """The pod object, or None if it does not exist."""

        def read() -> Any:
            return cluster.api.read_namespaced_pod(
                self._pod,
                cluster.namespace,
                _preload_content=False,
                _request_timeout=self.options.api_timeout,
            )

        try:
            pod = read_json(self._call("read pod", read))
        except ApiException as exc:
            if status_code(exc) == 404:
                return None
            raise _explain_refusal(exc, cluster, "get pods") from exc
        except Exception as exc:
            if unreachable(exc):
                raise _explain_refusal(exc, cluster, "get pods") from exc
            raise
        return pod if isinstance(pod, dict) else None

    def _wait_running(self, cluster: Cluster, deadline: float) -> None:
        """Poll until the pod runs; fail at once on a waiting reason that will not clear."""
        # Short polls at first: a pod of a cached image runs within a few hundred ms.
        delay, last = 0.05, "not scheduled yet"
        while True:
            pod = self._read(cluster)
            if pod is None:
                raise SandboxStartError(f"pod {self._pod} disappeared while starting")
            status = pod.get("status") or {}
            phase = status.get("phase", "Pending")
            states = [(s.get("state") or {}) for s in status.get("containerStatuses") or []]
            if phase == "Running" and states and all("running" in s for s in states):
                self._pod_ip = status.get("podIP") or None
                return
            if phase in ("Failed", "Succeeded"):
                why = status.get("reason") or ""
                raise SandboxStartError(
                    f"pod {self._pod} ended before it ran ({phase} {why}): "
                    f"{status.get('message') or ''}".rstrip(": ")
                )
            for state in states:
                waiting = state.get("waiting") or {}
                reason = waiting.get("reason")
                if reason in _FATAL_WAITING:
                    raise SandboxStartError(
                        f"pod {self._pod} cannot start {self.config.image!r}: {reason}: "
                        f"{waiting.get('message') or ''}".rstrip(": ")
                    )
                if reason:
                    last = reason
            for condition in status.get("conditions") or []:
                if condition.get("status") == "False" and condition.get("reason"):
                    last = f"{condition['reason']}: {condition.get('message') or ''}".rstrip(": ")
                    break
            if time.monotonic() + delay > deadline:
                raise SandboxTimeoutError(
                    f"pod {self._pod} did not run within start_timeout "
                    f"{self.config.start_timeout:.0f}s (last: {last})"
                )
            time.sleep(delay)
            delay = min(delay * 1.25, 1.0)

    def _pulls(self, cluster: Cluster) -> int:
        """The image pulls this pod's start waited for: the kubelet's ``Pulling`` events.

        Read once the pod runs, for the run's accounting (``pulls``).  The kubelet records a
        ``Pulling`` event only when the image was not on the node.  A cluster that does not
        let this account list events, or does not answer, counts none: accounting never
        fails a start.
        """
        try:
            events = read_json(
                cluster.api.list_namespaced_event(
                    cluster.namespace,
                    field_selector=f"involvedObject.name={self._pod},reason=Pulling",
                    _preload_content=False,
                    _request_timeout=self.options.api_timeout,
                )
            )
        except Exception as exc:  # see the docstring: accounting never fails a start
            logger.debug("could not list the events of pod %s: %s", self._pod, exc)
            return 0
        return len(events.get("items") or []) if isinstance(events, dict) else 0

    def _prepare(self, deadline: float) -> None:
        """Create the workdir and learn the shell and the exec protocol, in one exec."""
        script = (
            'mkdir -p -- "$1" || exit 1; '
            "if command -v bash >/dev/null 2>&1; then echo bash; else echo sh; fi"
        )
        argv = ["/bin/sh", "-c", script, "sh", self.config.workdir]
        outcome = self._exec_argv(argv, None, deadline, _small_buffers())
        if not outcome.finished:
            raise SandboxTimeoutError(f"preparing pod {self._pod} ran past start_timeout")
        code = self._exit_code(outcome)
        if code != 0:
            raise SandboxStartError(
                f"cannot create {self.config.workdir} in pod {self._pod}: "
                f"{outcome.stderr.getvalue().decode(errors='replace').strip()}"
            )
        self._shell = "bash" if outcome.stdout.getvalue().strip() == b"bash" else "/bin/sh"
        self._close_stdin = outcome.protocol == V5_PROTOCOL

    def _delete_quietly(self) -> None:
        try:
            self.stop()
        except SandboxError as exc:
            logger.warning("could not delete pod %s: %s", self._pod, exc)

    def _delete_claim_quietly(self, name: str | None = None) -> None:
        """Delete the workdir's claim (or ``name``); a failure is logged (``reap`` finds it)."""
        name = name or self._claim
        if name is None:
            return
        try:
            self._snapshots().delete_claim(name)
        except Exception as exc:  # the pod is what matters; reap removes a leftover claim
            logger.warning("could not delete claim %s: %s", name, exc)

    def stop(self, *, keep_claim: bool = False) -> None:
        """Delete the pod at once (grace period 0), then its claim; a deleted pod is fine."""
        if not self._started:
            self._delete_claim_quietly()
            return
        cluster = self.cluster

        def delete() -> None:
            try:
                cluster.api.delete_namespaced_pod(
                    self._pod,
                    cluster.namespace,
                    grace_period_seconds=0,
                    _preload_content=False,
                    _request_timeout=self.options.api_timeout,
                )
            except ApiException as exc:
                if status_code(exc) != 404:
                    raise

        if self._agent is not None:
            self._agent.close_idle()  # while the agent can still answer their close
        try:
            self._call("delete pod", delete)
        except Exception as exc:
            if isinstance(exc, ApiException) or unreachable(exc):
                raise _explain_refusal(exc, cluster, "delete pods") from exc
            raise
        finally:
            # After the deletion, so that a command running meanwhile sees its sandbox gone.
            if self._agent is not None:
                self._agent.close()
        if not keep_claim:
            self._delete_claim_quietly()

    def is_alive(self) -> bool:
        """True while the pod exists, runs, and is not being deleted."""
        if not self._started:
            return False
        try:
            pod = self._read(self.cluster)
        except SandboxError:
            return False
        return pod is not None and _running(pod)

    # -- lifetime (docs/leases.md; the rules are in _lease) -----------------------------------

    def set_expiry(self, expires_at: float) -> None:
        """Write the pod's lease file (its timer ends it there), then move its labels' end."""
        request = ExecRequest(
            command=write_end_script(expires_at, self._lease_key), cwd="/", timeout=60
        )
        result = self.exec(request)
        if result.exit_code != 0:
            if not self.is_alive():
                raise SandboxGoneError(f"pod {self._pod} is gone")
            raise BackendError(f"cannot move the pod's end: {result.output.strip()}")
        cluster = self.cluster

        def patch() -> Any:
            return cluster.api.patch_namespaced_pod(
                self._pod,
                cluster.namespace,
                _lease.expiry_patch(expires_at),
                _preload_content=False,
                _request_timeout=self.options.api_timeout,
            )

        try:
            self._call("patch pod", patch)
        except ApiException as exc:
            if status_code(exc) == 404:
                raise SandboxGoneError(f"pod {self._pod} is gone") from exc
            raise _explain_refusal(exc, cluster, "patch pods") from exc

    def max_expiry(self, started_at: float) -> float | None:
        """The pod's ``activeDeadlineSeconds`` ends it whatever its lease says."""
        return started_at + _lease.deadline_seconds(self.config)

    def gone_cause(self) -> str:
        """The pod's end as its status tells it (``_lease.gone_cause``)."""
        return _lease.gone_cause(self._read(self.cluster))

    # -- commands ----------------------------------------------------------------------------

    def _exec_argv(
        self,
        argv: list[str],
        stdin: bytes | None,
        deadline: float | None,
        buffers: tuple[HeadTailBuffer, HeadTailBuffer],
    ) -> ExecOutcome:
        """Open an exec and pump it, capturing into ``buffers`` (stdout, stderr)."""
        cluster = self.cluster
        try:
            client = call_with_retries(
                lambda: open_exec(
                    cluster.exec_api(),
                    self._pod,
                    cluster.namespace,
                    CONTAINER,
                    argv,
                    stdin is not None,
                ),
                handshake_refused,
                description=f"exec in pod {self._pod}",
                policy=_EXEC_OPEN_POLICY,
                retry_after=retry_after,
                limiter=_limiter(cluster, self.options),
            )
        except Exception as exc:
            raise self._exec_failure(exc) from exc
        return run_exec(client, stdin, deadline, buffers)

    def _exec_failure(self, exc: BaseException) -> SandboxError:
        """Why an exec could not start: the pod is gone or stopped, or the API said no."""
        cluster = self.cluster
        pod = self._read(cluster)
        if pod is None:
            return SandboxGoneError(f"pod {self._pod} no longer exists")
        status = pod.get("status") or {}
        if status.get("phase") != "Running" or (pod.get("metadata") or {}).get("deletionTimestamp"):
            why = status.get("reason") or status.get("phase") or "terminating"
            return SandboxGoneError(f"pod {self._pod} is not running ({why})")
        return _explain_refusal(exc, cluster, "create pods/exec")

    def _exit_code(self, outcome: ExecOutcome) -> int:
        """The exit code from the error channel's ``Status``."""
        status = outcome.status
        if status is None:
            if not self.is_alive():
                raise SandboxGoneError(f"pod {self._pod} ended during the command")
            raise BackendError(f"the exec in pod {self._pod} ended without an exit status")
        if status.get("status") == "Success":
            return 0
        if status.get("reason") == "NonZeroExitCode":
            for cause in (status.get("details") or {}).get("causes") or []:
                if cause.get("reason") == "ExitCode":
                    return int(cause.get("message", "1"))
        raise BackendError(f"exec failed in pod {self._pod}: {status.get('message') or status}")

    def _native_exec(self, request: ExecRequest) -> ExecResult:
        """Run a command with ``cwd``, ``env``, stdin and a group-killing timeout."""
        began = time.monotonic()
        token = new_token()
        command: str | tuple[str, ...] = request.command
        if request.stdin is not None and not self._close_stdin:
            command = bounded_stdin(shell_text(command), len(request.stdin))
        argv = [
            "env",
            f"{TOKEN_VAR}={token}",
            *(f"{name}={value}" for name, value in request.env.items()),
            *wrapped_argv(command, request.cwd, token, self._shell),
        ]
        deadline = None if request.timeout is None else began + request.timeout
        outcome = self._exec_argv(argv, request.stdin, deadline, request.output_buffers())
        timed_out = not outcome.finished
        exit_code = 0
        if timed_out:
            self._kill_group(token)
        else:
            exit_code = self._exit_code(outcome)
            check_cwd(exit_code, outcome.stderr.getvalue(), request.cwd)
        return ExecResult.from_buffers(
            request.display,
            exit_code,
            outcome.stdout,
            outcome.stderr,
            began=began,
            timed_out=timed_out,
        )

    def _kill_group(self, token: str) -> None:
        try:
            self._kill_carriers(token)
        except SandboxError as exc:
            logger.warning("could not kill a timed-out command in pod %s: %s", self._pod, exc)

    def _kill_carriers(self, token: str) -> None:
        """SIGKILL, by an exec of its own, every process carrying a command's ``token``."""
        self._exec_argv(kill_group_script(token), None, time.monotonic() + 30, _small_buffers())

    def _agent_running(self) -> bool:
        """Whether the agent's process can run, read by a native exec (see AgentLink)."""
        request = ExecRequest(
            command=tuple(agent_state_command(self._agent_dir)), cwd="/", timeout=30
        )
        try:
            result = self._native_exec(request)
        except SandboxError:
            return True  # cannot tell: the wait decides
        return result.exit_code != 0 or agent_can_run(result.stdout.strip())

    # -- files -------------------------------------------------------------------------------

    def _tar(self, argv: tuple[str, ...], stdin: bytes | None) -> ExecResult:
        request = ExecRequest(
            command=argv, cwd="/", stdin=stdin, timeout=_FILE_TIMEOUT, max_output_bytes=_UNLIMITED
        )
        result = self._native_exec(request)
        if result.timed_out:
            raise SandboxTimeoutError(f"moving files in pod {self._pod} took over an hour")
        return result

    def _native_put_archive(self, data: bytes) -> None:
        """Extract at ``/`` with ``tar`` reading stdin, as ``kubectl cp`` does."""
        result = self._tar(("tar", "-x", "-f", "-", "-C", "/"), data)
        if result.exit_code != 0:
            raise BackendError(f"tar could not extract in pod {self._pod}: {result.stderr.strip()}")

    def _native_get_archive(self, path: str) -> bytes:
        """A tar of ``path`` from ``tar`` writing stdout, its top member the basename."""
        script = (
            'p=$1; if [ ! -e "$p" ] && [ ! -L "$p" ]; then exit '
            f"{_NO_SUCH_PATH_EXIT}; fi; "
            'cd -- "$(dirname -- "$p")" && exec tar -c -f - -- "$(basename -- "$p")"'
        )
        result = self._tar(("/bin/sh", "-c", script, "sh", path), None)
        if result.exit_code == _NO_SUCH_PATH_EXIT:
            raise SandboxFileNotFoundError(f"no such file or directory in the sandbox: {path}")
        if result.exit_code != 0:
            raise BackendError(f"tar could not archive {path}: {result.stderr.strip()}")
        return result.stdout_bytes

    # -- reaping -----------------------------------------------------------------------------

    @classmethod
    def _managed_pods(cls, opts: KubernetesOptions) -> tuple[Cluster, list[dict[str, Any]]]:
        """The pods this library made in the namespace, with the client that found them."""
        cluster = connect(opts)
        try:
            listing = read_json(
                call_with_retries(
                    lambda: cluster.api.list_namespaced_pod(
                        cluster.namespace,
                        label_selector=MANAGED_SELECTOR,
                        _preload_content=False,
                        _request_timeout=opts.api_timeout,
                    ),
                    retryable,
                    description="list pods",
                    retry_after=retry_after,
                    limiter=_limiter(cluster, opts),
                )
            )
        except Exception as exc:
            if isinstance(exc, ApiException) or unreachable(exc):
                raise _explain_refusal(exc, cluster, "list pods") from exc
            raise
        return cluster, list(listing.get("items") or [])

    @classmethod
    def list_sandboxes(cls, options: BackendOptions | None = None) -> list[SandboxInfo]:
        """Running pods carrying this library's labels in the configured namespace."""
        _cluster, pods = cls._managed_pods(cls.coerce_options(options))
        return [
            SandboxInfo.from_labels(
                cls.name, str(pod["metadata"]["name"]), full_labels(pod["metadata"])
            )
            for pod in pods
            if _running(pod)
        ]

    def attach(self, sandbox_id: str) -> None:
        """Take over a running pod of this library by name (in the configured namespace)."""
        self._pod = sandbox_id
        pod = self._read(self.cluster)
        if pod is None:
            raise SandboxGoneError(f"no pod {sandbox_id!r} in namespace {self.cluster.namespace}")
        metadata = pod.get("metadata") or {}
        labels = metadata.get("labels") or {}
        if ownership_view(metadata).get(MANAGED) != "true" or labels.get(BACKEND_KEY) != self.name:
            raise SandboxGoneError(f"pod {sandbox_id!r} is not a sandbox of this library")
        if not _running(pod):
            raise SandboxGoneError(f"pod {sandbox_id!r} is not running")
        self._lease_key = labels.get(_lease.LEASE_KEY, self._lease_key)
        for volume in (pod.get("spec") or {}).get("volumes") or []:
            if volume.get("name") == CLAIM_VOLUME:
                self._claim = volume["persistentVolumeClaim"]["claimName"]
                self._method_chosen, self._seed = True, False
                self._snapshot_class = snapshot_class(self.cluster, self.options)
        self._started = True
        self._prepare(time.monotonic() + self.config.start_timeout)

    @classmethod
    def _reap_volumes(
        cls, opts: KubernetesOptions, pods: list[dict[str, Any]], *, dry_run: bool
    ) -> list[ReapedSandbox]:
        """Snapshots of expired or ownerless checkpoints, and claims of dead owners or pods."""
        if opts.checkpoint_method == "archive":
            return []
        calls = cls._class_calls(opts)
        reaped: list[ReapedSandbox] = []
        for snapshot in calls.list_snapshots():
            metadata = snapshot.get("metadata") or {}
            reason = why_reapable(ownership_view(metadata))
            if reason is None:
                continue
            name = str(metadata.get("name"))
            reaped.append(ReapedSandbox(cls.name, name, f"checkpoint: {reason}"))
            if not dry_run:
                with contextlib.suppress(CheckpointNotFoundError):
                    calls.delete(name)
        by_name = {str((pod.get("metadata") or {}).get("name")): pod for pod in pods}
        for claim in calls.list_claims():
            reason = _reapable_claim(claim, by_name)
            if reason is None:
                continue
            name = str((claim.get("metadata") or {}).get("name"))
            reaped.append(ReapedSandbox(cls.name, name, reason))
            if not dry_run:
                calls.delete_claim(name)
        return reaped

    @classmethod
    def reap(
        cls, options: BackendOptions | None = None, *, dry_run: bool = False
    ) -> list[ReapedSandbox]:
        """Delete this library's pods that ended, expired, or lost their owner process.

        Checkpoints that expired or lost their owner go too (reasons ``checkpoint: ...``).
        """
        opts = cls.coerce_options(options)
        reaped = store_for(opts).reap(cls.name, dry_run=dry_run)
        cluster, pods = cls._managed_pods(opts)
        reaped += cls._reap_volumes(opts, pods, dry_run=dry_run)
        for pod in pods:
            metadata = pod.get("metadata") or {}
            if metadata.get("deletionTimestamp"):
                continue  # already going
            reason = why_reapable(ownership_view(metadata))
            phase = (pod.get("status") or {}).get("phase")
            # Pending is never debris by itself: its owner may be waiting for it to start.
            if reason is None and phase in ("Succeeded", "Failed"):
                detail = (pod.get("status") or {}).get("reason")
                reason = f"ended ({phase}{', ' + detail if detail else ''})"
            if reason is None:
                continue
            name = str(metadata.get("name"))
            reaped.append(ReapedSandbox(cls.name, name, reason))
            if dry_run:
                continue
            try:
                cluster.api.delete_namespaced_pod(
                    name,
                    cluster.namespace,
                    grace_period_seconds=0,
                    _preload_content=False,
                    _request_timeout=opts.api_timeout,
                )
                logger.info("reaped pod %s (%s)", name, reason)
            except ApiException as exc:
                if status_code(exc) != 404:
                    raise _explain_refusal(exc, cluster, "delete pods") from exc
        return reaped


def _reapable_claim(claim: dict[str, Any], pods: dict[str, dict[str, Any]]) -> str | None:
    """Why a workdir claim may go: its owner's reason, or its pod ended or long gone."""
    metadata = claim.get("metadata") or {}
    reason = why_reapable(ownership_view(metadata))
    if reason is not None:
        return f"claim: {reason}"
    pod = pods.get(str((metadata.get("annotations") or {}).get(POD_KEY)))
    if pod is None:
        # Made just before its pod: only a claim older than a start is an orphan.
        created = metadata.get("creationTimestamp")
        if created and time.time() - _epoch(str(created)) > _ORPHAN_CLAIM_AGE:
            return "claim: its pod is gone"
        return None
    if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
        return "claim: its pod ended"
    return None


def _epoch(stamp: str) -> float:
    return calendar.timegm(time.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ"))


def _running(pod: dict[str, Any]) -> bool:
    """True for a pod that runs and is not being deleted."""
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        return False
    return (pod.get("status") or {}).get("phase") == "Running"
