"""A SIGTERM'd or Ctrl-C'd ``rllm eval`` leaves no sandbox and no checkpoint, without ``reap``.

rLLM main is not on PyPI (CI cannot install it), so the host here is a stand-in for its CLI
that does what ``rllm eval`` does with our flow: it calls the flow's ``configure`` from its
main thread (rLLM's CLI hands its flags over there), then runs ``SWEFlow.run`` for a group of
rollouts of one task in worker threads against a model server (rLLM's engine runs flows in
threads), with setups shared, so a checkpoint image exists.  The model's first reply keeps
each rollout busy in ``sleep``; the signal arrives then.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from sandbox_runtime._core.ownership import OWNER_HOST, OWNER_PID, current_owner
from tests.conftest import DOCKER_IMAGE

ROOT = Path(__file__).resolve().parents[2]

HOST = textwrap.dedent(
    """
    import sys, threading, types
    from sandbox_runtime.integrations.rllm_flow import SWEFlow
    from sandbox_runtime.swe.dataset import load_rows
    from tests.swe.fake_chat import FakeChat

    [row] = [r for r in load_rows("bundled:r2e") if r["repo_name"] == "pager"]
    row = {**row, "id": "pager", "sandbox_runtime": {
        "backend": "docker", "tools": "builtin", "base_image": sys.argv[1],
        "step_timeout": 200}}
    flow = SWEFlow()
    flow.configure({})  # what rLLM's CLI does with its agent flags

    def rollout(index: int) -> None:
        sleeping = "<function=execute_bash>\\n<parameter=cmd>sleep 120</parameter>\\n</function>"
        with FakeChat([{"role": "assistant", "content": sleeping}]) as chat:
            flow.run(row, types.SimpleNamespace(base_url=chat.url, model="scripted"))

    threads = [threading.Thread(target=rollout, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    """
)


def _ours(kind: str, pid: int) -> int:
    """Containers (``kind='containers'``) or checkpoint images owned by process ``pid``."""
    import docker

    api = docker.APIClient(version="auto")
    try:
        if kind == "containers":
            found = api.containers(all=True, filters={"label": f"{OWNER_PID}={pid}"})
        else:
            found = api.images(filters={"label": "sandbox-runtime.checkpoint=true"})
    finally:
        api.close()
    host = current_owner().host
    return sum(
        1
        for item in found
        if (item.get("Labels") or {}).get(OWNER_PID) == str(pid)
        and (item.get("Labels") or {}).get(OWNER_HOST) == host
    )


def _as_a_foreground_job() -> None:
    """Give the child SIGINT's default action, as a terminal's foreground job has.

    A shell starts background jobs (``cmd &``, CI runners) with SIGINT ignored, and the
    child inherits that: Python then installs no ``KeyboardInterrupt`` handler, and a host
    that ignores SIGINT is one ``close_on_signal`` rightly leaves alone.
    """
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.parametrize(
    ("signum", "status"),
    [(signal.SIGTERM, -signal.SIGTERM), (signal.SIGINT, -signal.SIGINT)],
    ids=["SIGTERM", "SIGINT"],
)
def test_a_stopped_eval_leaves_nothing(
    tmp_path: Path, docker_image: str, signum: int, status: int
) -> None:
    script = tmp_path / "host.py"
    script.write_text(HOST)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, str(script), DOCKER_IMAGE],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_as_a_foreground_job,
    )
    try:
        deadline = time.monotonic() + 150
        while time.monotonic() < deadline and _ours("containers", proc.pid) < 2:
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.3)
        assert _ours("containers", proc.pid) == 2
        assert _ours("images", proc.pid) >= 1  # the shared setup's checkpoint
        time.sleep(2.0)  # both rollouts are inside their `sleep 120`
        proc.send_signal(signum)
        _, err = proc.communicate(timeout=150)
    finally:
        if proc.poll() is None:
            proc.kill()
    # Each signal then does what it did before: SIGTERM ends the process, SIGINT raises
    # KeyboardInterrupt, which Python ends with SIGINT when nothing catches it.
    assert proc.returncode == status, err
    assert _ours("containers", proc.pid) == 0, err
    assert _ours("images", proc.pid) == 0, err
