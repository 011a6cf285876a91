"""``forget_history``: the agent's repository keeps its base tree, index and working tree, and
nothing else of its history (later commits on a branch only ``packed-refs`` names, a stash,
the reflog, unreachable packed objects), on docker and on local."""

from __future__ import annotations

import pytest

from sandbox_runtime import SandboxRuntime
from sandbox_runtime.swe.history import forget_history
from tests.conftest import DOCKER_IMAGE, bwrap_problem, docker_problem, require

_HISTORY = (
    "mkdir -p r && cd r && git init -q && git config user.email a@b && git config user.name a"
    " && echo base > f && git add -A && git commit -qm base"
    " && git checkout -qb future && echo THE-FIX > f && git commit -qam fix"
    " && git checkout -q - && echo wip > g && git stash -u -q && git pack-refs --all"
    " && git gc -q && echo edited > f"
)


@pytest.mark.parametrize("backend", ["docker", "local"])
def test_only_the_base_is_left(backend: str) -> None:
    fields: dict[str, object]
    if backend == "docker":
        require(docker_problem())
        fields = {"backend": "docker", "image": DOCKER_IMAGE}
    else:
        require(bwrap_problem())
        fields = {"backend": "local", "options": {"isolation": "namespace"}}
    with SandboxRuntime(lifetime=300, **fields) as sandbox:
        sandbox.exec(_HISTORY, check=True)
        before = sandbox.exec("cd r && git -c safe.directory='*' rev-parse HEAD").stdout.strip()
        base = forget_history(sandbox, cwd="r")
        assert base == before  # the base keeps its id: scripts that name it still work
        assert sandbox.base_commit(cwd="r") == base
        look = "cd r && git -c safe.directory='*' "
        assert sandbox.exec(look + "log --all --format=%s").stdout == "base\n"
        assert sandbox.exec(look + "stash list").stdout == ""
        assert sandbox.exec(look + "reflog").stdout == ""
        assert sandbox.exec(look + "status --short").stdout == " M f\n"  # index kept
        objects = sandbox.exec(look + "cat-file --batch-all-objects --batch-check").stdout
        assert len(objects.splitlines()) == 3  # the commit, its tree, the base blob
        diff = sandbox.exec(look + f"diff {base} --stat").stdout
        assert "1 file changed" in diff
        assert sandbox.exec("grep -rl THE-FIX r/.git || true").stdout == ""
        assert sandbox.read_text("r/f") == "edited\n"
        # No template: sample hooks never run, but docker's tree mark reads each added path.
        assert sandbox.exec("ls r/.git/hooks 2>/dev/null || true").stdout == ""
        committed = sandbox.exec(
            look + "-c user.email=a@b -c user.name=a commit -qam next && git log -1 --format=%s"
        )
        assert committed.stdout.endswith("next\n"), committed.output  # still a working repo
