from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

from sandbox_runtime._core import ownership


def test_labels_name_the_owner_run_and_expiry() -> None:
    labels = ownership.make_labels(lifetime=60, run_id="run-1", extra={"team": "x"})
    assert labels[ownership.MANAGED] == "true"
    assert labels[ownership.OWNER_PID] == str(os.getpid())
    assert labels[ownership.OWNER_HOST] == socket.gethostname()
    assert labels[ownership.RUN_ID] == "run-1"
    assert labels["team"] == "x"
    assert int(labels[ownership.EXPIRES_AT]) - int(labels[ownership.CREATED_AT]) == 60


def test_user_labels_cannot_forge_ours() -> None:
    labels = ownership.make_labels(lifetime=60, run_id=None, extra={ownership.OWNER_PID: "1"})
    assert labels[ownership.OWNER_PID] == str(os.getpid())


def test_live_owner_keeps_its_sandbox() -> None:
    labels = ownership.make_labels(lifetime=600, run_id=None, extra={})
    assert ownership.why_reapable(labels) is None


def test_expired_sandbox_is_reapable() -> None:
    labels = ownership.make_labels(lifetime=1, run_id=None, extra={})
    assert ownership.why_reapable(labels, now=time.time() + 5) == "expired"


def test_dead_owner_is_detected() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        pid = child.pid
        labels = ownership.make_labels(lifetime=600, run_id=None, extra={})
        labels[ownership.OWNER_PID] = str(pid)
        labels[ownership.OWNER_START] = ownership._start_token(pid) or ""
        assert ownership.why_reapable(labels) is None
    finally:
        child.kill()
        child.wait()
    assert ownership.why_reapable(labels) == f"owner process {pid} is gone"


def test_reused_pid_is_not_mistaken_for_the_owner() -> None:
    labels = ownership.make_labels(lifetime=600, run_id=None, extra={})
    labels[ownership.OWNER_START] = "some-other-boot.12345"
    assert "pid reused" in (ownership.why_reapable(labels) or "")


def test_other_hosts_and_unmanaged_are_left_alone() -> None:
    labels = ownership.make_labels(lifetime=600, run_id=None, extra={})
    labels[ownership.OWNER_HOST] = "another-machine"
    labels[ownership.OWNER_PID] = "999999"
    assert ownership.why_reapable(labels) is None
    assert ownership.why_reapable({"com.example": "x"}) is None
