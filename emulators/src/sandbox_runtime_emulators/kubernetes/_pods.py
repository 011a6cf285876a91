"""Pods: the API objects, and the node that runs them (scheduler and kubelet in one).

The store answers create/get/list/delete the way the API server does and keeps each pod's
``status`` moving as a kubelet would report it: ``Pending`` (unschedulable when the
``nodeSelector`` does not match this one node; ``ContainerCreating``, then ``ErrImagePull`` /
``ImagePullBackOff`` while the image cannot be had), ``Running``, then ``Succeeded`` or
``Failed`` when the container exits or ``activeDeadlineSeconds`` passes
(``DeadlineExceeded``).  Each pod has one thread that starts its container and waits for it;
one more thread enforces deadlines.  Every write is recorded in the shared
:class:`~._changes.ChangeLog` (ADDED, MODIFIED, DELETED for watches), and the node records the
Events a kubelet does (``Scheduled``, ``Pulling``, ``Pulled``, ``Created``, ``Started``,
``Killing``, pull failures), which is also where offline image use is said.
"""

from __future__ import annotations

import copy
import logging
import secrets
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ._changes import ChangeLog
from ._docker import DockerRuntime, ImageProblem, RuntimeProblem
from ._namespaces import Namespaces
from ._objects import now as _now
from ._patch import apply_pod_patch
from ._selectors import FieldSelector, LabelSelector
from ._status import already_exists, bad_request, not_found
from ._validation import validate_pod
from ._volumes import Volumes

__all__ = ["NODE_LABELS", "PodRecord", "PodStore"]

logger = logging.getLogger("sandbox_runtime_emulators.kubernetes")

#: Labels of the emulator's one node, which ``nodeSelector`` is matched against.
NODE_LABELS = {"kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"}
_BACKOFF_START, _BACKOFF_MAX = 1.0, 30.0


@dataclass
class PodRecord:
    """One pod: the object served, and what the node knows about it."""

    obj: dict[str, Any]
    container_id: str | None = None
    gone: bool = False
    started: float | None = None  # monotonic time of status.startTime

    @property
    def key(self) -> tuple[str, str]:
        """(namespace, name)."""
        return self.obj["metadata"]["namespace"], self.obj["metadata"]["name"]


class PodStore:
    """The pods of every namespace, and the node running them; thread-safe."""

    def __init__(
        self,
        runtime: DockerRuntime,
        node_name: str,
        changes: ChangeLog | None = None,
        namespaces: Namespaces | None = None,
    ) -> None:
        self.runtime = runtime
        self.node_name = node_name
        self.node_labels = {**NODE_LABELS, "kubernetes.io/hostname": node_name}
        self.changes = changes or ChangeLog()
        self.namespaces = namespaces or Namespaces(self.changes)
        self.namespaces.purge_pods = self.purge
        self._lock = self.changes.lock
        self._pods: dict[tuple[str, str], PodRecord] = {}
        self._closed = threading.Event()
        # Pod threads, container removals and graceful stops still under way; close() waits
        # for them, or a process exiting right after close() would kill them half-way and
        # leave containers behind.
        self._workers: set[threading.Thread] = set()
        #: PersistentVolumeClaims and VolumeSnapshots, whose copies run as this node's workers.
        self.volumes = Volumes(
            self.changes, self.namespaces, runtime, self._in_background, self._closed
        )
        self._deadlines = threading.Thread(
            target=self._deadline_loop, name="k8s-emulator-deadlines", daemon=True
        )
        self._deadlines.start()

    # -- API operations ----------------------------------------------------------------------

    def _bump(self, obj: dict[str, Any], kind: str = "MODIFIED") -> None:
        self.changes.record("pods", kind, obj)

    @property
    def closed(self) -> threading.Event:
        """Set once the emulator shuts down (long answers such as watches end then)."""
        return self._closed

    @property
    def resource_version(self) -> str:
        """The cluster's current resource version (list metadata)."""
        return str(self.changes.version)

    def _event(self, record: PodRecord, reason: str, message: str, **how: Any) -> None:
        with self._lock:
            if record.gone:
                return
            pod = copy.deepcopy(record.obj)
        self.namespaces.record_event(pod, reason, message, host=self.node_name, **how)

    def create(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        """Validate, default and store a pod; its node thread starts it.  Returns the object."""
        pod = copy.deepcopy(body)
        validate_pod(namespace, pod)
        meta = pod["metadata"]
        with self._lock:
            if not meta.get("name"):
                meta["name"] = meta["generateName"] + secrets.token_hex(3)[:5]
            name = meta["name"]
            self.namespaces.require_active(namespace, "pods", name)
            if (namespace, name) in self._pods:
                raise already_exists("pods", name)
            self.namespaces.require_service_account(
                namespace, pod["spec"]["serviceAccountName"], name
            )
            meta.update(
                namespace=namespace,
                uid=str(uuid.uuid4()),
                creationTimestamp=_now(),
                generation=1,
            )
            meta.setdefault("labels", {})
            meta.setdefault("annotations", {})
            pod.update(apiVersion="v1", kind="Pod")
            pod["status"] = {"phase": "Pending", "qosClass": _qos_class(pod["spec"])}
            self._bump(pod, "ADDED")
            record = PodRecord(pod)
            self._pods[(namespace, name)] = record
            answer = copy.deepcopy(pod)
        self._in_background(self._run_pod, record)
        return answer

    def patch(self, namespace: str, name: str, body: Any) -> dict[str, Any]:
        """Apply a merge patch (labels, annotations, a lowered deadline; see ``_patch``)."""
        record = self.record(namespace, name)
        with self._lock:
            changed = copy.deepcopy(record.obj)
            apply_pod_patch(changed, body)
            record.obj["metadata"]["labels"] = changed["metadata"]["labels"]
            record.obj["metadata"]["annotations"] = changed["metadata"]["annotations"]
            record.obj["spec"] = changed["spec"]
            self._bump(record.obj)
            return copy.deepcopy(record.obj)

    def crash(self, namespace: str, name: str) -> None:
        """Kill a pod's container as a crashed node would (fault injection); the pod follows."""
        with self._lock:
            record = self._pods.get((namespace, name))
            container_id = record.container_id if record is not None else None
        if container_id is not None:
            self.runtime.kill(container_id)

    def record(self, namespace: str, name: str) -> PodRecord:
        """The live record of a pod, or the server's 404."""
        with self._lock:
            record = self._pods.get((namespace, name))
        if record is None:
            raise not_found("pods", name)
        return record

    def get(self, namespace: str, name: str) -> dict[str, Any]:
        """A copy of the pod object, or 404."""
        record = self.record(namespace, name)
        with self._lock:
            return copy.deepcopy(record.obj)

    @staticmethod
    def selector(label_selector: str, field_selector: str) -> Callable[[Any], bool]:
        """A predicate for pod objects; 400 when a selector does not parse."""
        try:
            labels = LabelSelector(label_selector)
            fields = FieldSelector(field_selector)
        except ValueError as exc:
            raise bad_request(str(exc)) from exc
        return lambda pod: bool(
            labels.matches(pod["metadata"].get("labels") or {}) and fields.matches(pod)
        )

    def list_pods(
        self, namespace: str | None, label_selector: str = "", field_selector: str = ""
    ) -> list[dict[str, Any]]:
        """Copies of the matching pods, ordered by namespace and name (as etcd returns them)."""
        matches = self.selector(label_selector, field_selector)
        with self._lock:
            return [
                copy.deepcopy(record.obj)
                for key, record in sorted(self._pods.items())
                if (namespace is None or key[0] == namespace) and matches(record.obj)
            ]

    def purge(self, namespace: str) -> int:
        """Delete every pod of ``namespace`` with its own grace period; how many remain.

        The namespace controller's part in a namespace's termination: pods already being
        deleted are left to finish.
        """
        with self._lock:
            names = [
                name
                for (ns, name), record in self._pods.items()
                if ns == namespace and "deletionTimestamp" not in record.obj["metadata"]
            ]
        for name in names:
            try:
                self.delete(namespace, name, None)
            except Exception:  # deleted meanwhile: counted below
                logger.debug("pod %s/%s went away during its namespace's purge", namespace, name)
        with self._lock:
            return sum(1 for (ns, _name) in self._pods if ns == namespace)

    def delete(self, namespace: str, name: str, grace: int | None) -> dict[str, Any]:
        """Delete a pod: at once with grace 0, else after SIGTERM and up to ``grace`` seconds."""
        with self._lock:
            record = self._pods.get((namespace, name))
            if record is None:
                raise not_found("pods", name)
            spec = record.obj["spec"]
            grace = int(spec.get("terminationGracePeriodSeconds", 30)) if grace is None else grace
            meta = record.obj["metadata"]
            meta.setdefault("deletionTimestamp", _now())
            meta["deletionGracePeriodSeconds"] = grace
            self._bump(record.obj)
            answer = copy.deepcopy(record.obj)
            running = record.obj["status"].get("phase") == "Running"
            if grace <= 0 or not running:
                self._forget(record)
                return answer
            container_id = record.container_id
        self._event(record, "Killing", f"Stopping container {spec['containers'][0]['name']}")
        self._in_background(self._terminate, record, container_id, grace)
        return answer

    def _forget(self, record: PodRecord) -> None:
        """Drop the object now and remove its container in the background (lock held)."""
        if self._pods.pop(record.key, None) is not None:
            self._bump(record.obj, "DELETED")
        record.gone = True
        if record.container_id is not None:
            self._in_background(self.runtime.remove, record.container_id)

    def _in_background(self, target: Any, *args: Any) -> None:
        """Run ``target`` on its own thread, remembered until it ends (see ``close``)."""

        def run() -> None:
            try:
                target(*args)
            finally:
                with self._lock:
                    self._workers.discard(thread)

        thread = threading.Thread(target=run, name=f"k8s-emulator-{target.__name__}", daemon=True)
        with self._lock:
            self._workers.add(thread)
        thread.start()

    def _terminate(self, record: PodRecord, container_id: str | None, grace: int) -> None:
        if container_id is not None:
            self.runtime.stop(container_id, grace)
        with self._lock:
            if not record.gone:
                self._forget(record)

    def close(self) -> None:
        """Remove every pod's container (the emulator is shutting down)."""
        self._closed.set()
        self.namespaces.close()
        with self._lock:
            records = list(self._pods.values())
            for record in records:
                self._pods.pop(record.key, None)
                record.gone = True
        for record in records:
            if record.container_id is not None:
                self.runtime.remove(record.container_id)
        with self._lock:
            pending = list(self._workers)
        for thread in pending:
            thread.join(timeout=60)
        self.volumes.close()

    # -- the node ------------------------------------------------------------------------------

    def _set_status(self, record: PodRecord, **changes: Any) -> bool:
        """Apply status changes unless the pod is gone; False if it is."""
        with self._lock:
            if record.gone:
                return False
            record.obj["status"].update(changes)
            self._bump(record.obj)
            return True

    def _container_status(self, record: PodRecord, state: dict[str, Any], **extra: Any) -> bool:
        container = record.obj["spec"]["containers"][0]
        status = {
            "name": container["name"],
            "image": container["image"],
            "imageID": extra.pop("image_id", ""),
            "ready": extra.pop("ready", False),
            "started": extra.pop("started", False),
            "restartCount": extra.pop("restart_count", 0),
            "state": state,
        }
        if record.container_id:
            status["containerID"] = f"docker://{record.container_id}"
        status.update(extra)
        return self._set_status(record, containerStatuses=[status])

    def _conditions(self, ready: bool, reason: str | None = None) -> list[dict[str, Any]]:
        now = _now()
        conditions = []
        for kind in ("Initialized", "Ready", "ContainersReady", "PodScheduled"):
            status = ready or kind in ("Initialized", "PodScheduled")
            condition: dict[str, Any] = {
                "type": kind,
                "status": "True" if status else "False",
                "lastProbeTime": None,
                "lastTransitionTime": now,
            }
            if not status and reason:
                condition["reason"] = reason
            conditions.append(condition)
        return conditions

    def _schedulable(self, record: PodRecord) -> bool:
        wanted = record.obj["spec"].get("nodeSelector") or {}
        if all(self.node_labels.get(key) == value for key, value in wanted.items()):
            return True
        self._unschedulable(record, "1 node(s) didn't match Pod's node affinity/selector")
        return False

    def _unschedulable(self, record: PodRecord, why: str) -> None:
        """``Pending`` with the scheduler's ``Unschedulable`` condition, in a real one's words."""
        self._set_status(
            record,
            conditions=[
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "lastProbeTime": None,
                    "lastTransitionTime": _now(),
                    "reason": "Unschedulable",
                    "message": f"0/1 nodes are available: {why}. preemption: 0/1 nodes are "
                    "available: 1 Preemption is not helpful for scheduling.",
                }
            ],
        )

    def _run_pod(self, record: PodRecord) -> None:
        """Schedule, pull, create, start, then wait for the container: one pod's node thread."""
        try:
            self._run_pod_steps(record)
        except Exception:  # pragma: no cover - a bug here must not kill the server silently
            logger.exception("pod %s/%s failed in the emulator", *record.key)

    def _claims_bound(self, record: PodRecord) -> dict[str, str] | None:
        """Wait until every claim the pod mounts is bound; {volume: Docker volume}, or None.

        The scheduler's volume binding: meanwhile the pod is ``Pending``, unschedulable, with
        the reason a real one gives.
        """
        namespace = record.key[0]
        spec = record.obj["spec"]
        claims = {
            volume["name"]: volume["persistentVolumeClaim"] for volume in spec.get("volumes") or []
        }
        shown = ""
        while not record.gone and not self._closed.is_set():
            found: dict[str, str] = {}
            why = ""
            for name, claim in claims.items():
                docker_volume, why = self.volumes.claim_volume(namespace, claim["claimName"])
                if docker_volume is None:
                    break
                found[name] = docker_volume
            else:
                return found
            if why != shown:
                shown = why
                self._unschedulable(record, why)
            self._closed.wait(0.05)
        return None

    def _run_pod_steps(self, record: PodRecord) -> None:
        if not self._schedulable(record):
            return
        bound = self._claims_bound(record)
        if bound is None:
            return
        with self._lock:
            if record.gone:
                return
            record.obj["spec"]["nodeName"] = self.node_name
            record.started = time.monotonic()
        namespace, name = record.key
        self._event(
            record,
            "Scheduled",
            f"Successfully assigned {namespace}/{name} to {self.node_name}",
            component="default-scheduler",
        )
        self._set_status(
            record,
            hostIP="127.0.0.1",
            startTime=_now(),
            conditions=self._conditions(False, "ContainersNotReady"),
        )
        container = record.obj["spec"]["containers"][0]
        waiting = {"waiting": {"reason": "ContainerCreating"}}
        self._container_status(record, waiting)
        image_id = self._pull(record, container["image"], container["imagePullPolicy"])
        if image_id is None:
            return
        self.volumes.helper_image = container["image"]
        if not self._run_init_containers(record, bound):
            return
        mounts = _mounts(record.obj["spec"], container, bound)
        docker_name = f"k8s-emu_{namespace}_{name}_{uuid.uuid4().hex[:8]}"
        try:
            created = self.runtime.create(record.obj, docker_name, mounts)
        except RuntimeProblem as exc:
            self._container_status(
                record, {"waiting": {"reason": "CreateContainerError", "message": str(exc)}}
            )
            self._event(record, "Failed", f"Error: {exc}", warning=True)
            return
        self._event(record, "Created", f"Created container {container['name']}")
        with self._lock:
            record.container_id = created
            if record.gone:
                self.runtime.remove(created)
                return
        try:
            address = self.runtime.start(created)
        except RuntimeProblem as exc:
            self._container_status(
                record, {"waiting": {"reason": "RunContainerError", "message": str(exc)}}
            )
            self._event(record, "Failed", f"Error: {exc}", warning=True)
            return
        self._event(record, "Started", f"Started container {container['name']}")
        began = _now()
        self._container_status(
            record, {"running": {"startedAt": began}}, image_id=image_id, ready=True, started=True
        )
        with self._lock:
            deadline_passed = record.obj["status"].get("reason") == "DeadlineExceeded"
        if deadline_passed:  # the deadline fell while the container was being created
            self.runtime.kill(created)
        elif not self._set_status(
            record,
            phase="Running",
            podIP=address,
            podIPs=[{"ip": address}] if address else [],
            conditions=self._conditions(True),
        ):
            # Deleted while its container was starting: the removal that delete sent may have
            # lost the race with the start (Docker refuses to remove a container mid-start).
            self.runtime.remove(created)
            return
        exit_code = self.runtime.wait(created)
        self._exited(record, exit_code, began, image_id)

    def _run_init_containers(self, record: PodRecord, bound: dict[str, str]) -> bool:
        """Run each init container to completion, in order; False if one failed or the pod went.

        A failed one fails the pod (``Init:Error``), as with ``restartPolicy: Never``.
        """
        namespace, name = record.key
        statuses: list[dict[str, Any]] = []
        for index, init in enumerate(record.obj["spec"].get("initContainers") or []):
            if record.gone or self._closed.is_set():
                return False
            image_id = self._pull(record, init["image"], init["imagePullPolicy"])
            if image_id is None:
                return False
            docker_name = f"k8s-emu_{namespace}_{name}_init{index}_{uuid.uuid4().hex[:8]}"
            mounts = _mounts(record.obj["spec"], init, bound)
            began = _now()
            try:
                created = self.runtime.create(record.obj, docker_name, mounts, init)
                self.runtime.start(created)
            except RuntimeProblem as exc:
                self._event(record, "Failed", f"Error: {exc}", warning=True)
                self._set_status(record, phase="Failed", reason="Init:Error", message=str(exc))
                return False
            exit_code = self.runtime.wait(created)
            self.runtime.remove(created)
            statuses.append(
                {
                    "name": init["name"],
                    "image": init["image"],
                    "imageID": image_id,
                    "containerID": f"docker://{created}",
                    "started": False,
                    "ready": exit_code == 0,
                    "restartCount": 0,
                    "state": {
                        "terminated": {
                            "exitCode": exit_code,
                            "reason": "Completed" if exit_code == 0 else "Error",
                            "startedAt": began,
                            "finishedAt": _now(),
                        }
                    },
                }
            )
            self._set_status(record, initContainerStatuses=list(statuses))
            if exit_code != 0:
                message = f"init container {init['name']} exited with {exit_code}"
                self._set_status(record, phase="Failed", reason="Init:Error", message=message)
                return False
        return True

    def _pull(self, record: PodRecord, image: str, policy: str) -> str | None:
        """The image id once the image is there; None if the pod went away meanwhile.

        Failures alternate ``ErrImagePull`` and ``ImagePullBackOff`` with a growing back-off,
        as a kubelet does; ``ErrImageNeverPull`` is final.
        """
        backoff = _BACKOFF_START
        while not record.gone and not self._closed.is_set():
            try:
                ready = self.runtime.ensure_image(
                    image,
                    policy,
                    on_pull=lambda: self._event(record, "Pulling", f'Pulling image "{image}"'),
                )
            except ImageProblem as problem:
                waiting = {"waiting": {"reason": problem.reason, "message": problem.message}}
                if not self._container_status(record, waiting):
                    return None
                self._event(record, "Failed", problem.message, warning=True)
                if problem.reason == "ErrImageNeverPull":
                    return None
            else:
                self._event(record, "Pulled", ready.message)
                return ready.image_id
            if self._closed.wait(backoff) or record.gone:
                return None
            message = f'Back-off pulling image "{image}"'
            self._container_status(
                record, {"waiting": {"reason": "ImagePullBackOff", "message": message}}
            )
            self._event(record, "BackOff", message)
            if self._closed.wait(backoff):
                return None
            backoff = min(backoff * 2, _BACKOFF_MAX)
        return None

    def _exited(self, record: PodRecord, exit_code: int, began: str, image_id: str) -> None:
        """Record the container's end and the pod phase it implies."""
        terminated = {
            "exitCode": exit_code,
            "reason": "Completed" if exit_code == 0 else "Error",
            "startedAt": began,
            "finishedAt": _now(),
            "containerID": f"docker://{record.container_id}",
        }
        with self._lock:
            if record.gone:
                return
            status = record.obj["status"]
            policy = record.obj["spec"].get("restartPolicy", "Always")
            already_failed = status.get("phase") == "Failed"
        restarts = policy == "Always" or (policy == "OnFailure" and exit_code != 0)
        if restarts and not already_failed:
            # The emulator does not restart containers: it reports what a kubelet reports
            # between restarts, for good.
            message = "back-off restarting failed container"
            self._container_status(
                record,
                {"waiting": {"reason": "CrashLoopBackOff", "message": message}},
                image_id=image_id,
                restart_count=1,
                lastState={"terminated": terminated},
            )
            self._set_status(record, conditions=self._conditions(False, "ContainersNotReady"))
            return
        self._container_status(record, {"terminated": terminated}, image_id=image_id)
        changes: dict[str, Any] = {"conditions": self._conditions(False, "PodCompleted")}
        if not already_failed:
            changes["phase"] = "Succeeded" if exit_code == 0 else "Failed"
        self._set_status(record, **changes)

    def _deadline_loop(self) -> None:
        """Fail pods that have been active longer than ``activeDeadlineSeconds``."""
        while not self._closed.wait(0.2):
            now = time.monotonic()
            expired: list[PodRecord] = []
            with self._lock:
                for record in self._pods.values():
                    deadline = record.obj["spec"].get("activeDeadlineSeconds")
                    phase = record.obj["status"].get("phase")
                    if (
                        deadline
                        and record.started is not None
                        and phase in ("Pending", "Running")
                        and now - record.started >= deadline
                    ):
                        record.obj["status"].update(
                            phase="Failed",
                            reason="DeadlineExceeded",
                            message="Pod was active on the node longer than the specified deadline",
                        )
                        self._bump(record.obj)
                        expired.append(record)
            for record in expired:
                if record.container_id is not None:
                    self.runtime.kill(record.container_id)


def _mounts(
    spec: dict[str, Any], container: dict[str, Any], bound: dict[str, str]
) -> list[tuple[str, str, bool]]:
    """(mount path, Docker volume, read-only) of each of ``container``'s volume mounts."""
    claims = {v["name"]: v["persistentVolumeClaim"] for v in spec.get("volumes") or []}
    return [
        (
            mount["mountPath"],
            bound[mount["name"]],
            bool(mount.get("readOnly") or claims[mount["name"]].get("readOnly")),
        )
        for mount in container.get("volumeMounts") or []
    ]


def _qos_class(spec: dict[str, Any]) -> str:
    resources = spec["containers"][0].get("resources") or {}
    requests, limits = resources.get("requests") or {}, resources.get("limits") or {}
    if not requests and not limits:
        return "BestEffort"
    if all(k in limits for k in ("cpu", "memory")) and all(
        requests.get(k, limits[k]) == limits[k] for k in ("cpu", "memory")
    ):
        return "Guaranteed"
    return "Burstable"
