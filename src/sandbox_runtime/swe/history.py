"""Forget the repository's history in the agent's sandbox, so the fix cannot be looked up.

A task's repository is often a clone at the base commit with the rest of its history still
inside: later commits reachable through ``git log --all``, a branch only ``packed-refs``
names, a stash, the reflog, or unreachable objects in a pack.  The fix is then one
``git show`` away, and a policy that finds it earns the reward by copying it: a hack that no
grading can tell from a fix, because it *is* the fix.  So the agent's sandbox gets a
repository that knows only the base: one root commit of the base tree, in a new object
store, with the working tree and the index as they were.

Done right after setup, before the agent runs (so the commands that do it are trusted), and
only where grading happens elsewhere: a fresh grading sandbox (strict grading, ``--grade-in
fresh``) has the original repository, which benchmark scripts need (SWE-bench's eval script
checks files out of the base commit by its id).

The cost is one ``git fetch`` of the base tree into the new store, which packs every object
of the tree once: about as long as a ``git add`` of the checkout (docs/performance.md).
"""

from __future__ import annotations

import shlex

from sandbox_runtime._core.runtime import SandboxRuntime
from sandbox_runtime.errors import SandboxError

__all__ = ["forget_history"]

#: Rebuild ``.git`` holding one root commit of ``HEAD``'s tree: fetch that commit (and so
#: only its objects) into a new repository, carry the index and the local settings over, and
#: swap the directories.  Remotes go with the old store.
_SCRIPT = r"""
set -eu
g() { git -c safe.directory='*' "$@"; }
top=$(g rev-parse --show-toplevel)
cd "$top"
old=$(g rev-parse --absolute-git-dir)
branch=$(g symbolic-ref -q --short HEAD || echo main)
tree=$(g rev-parse 'HEAD^{tree}')
commit=$(GIT_AUTHOR_NAME=base GIT_AUTHOR_EMAIL=base@sandbox-runtime \
  GIT_COMMITTER_NAME=base GIT_COMMITTER_EMAIL=base@sandbox-runtime \
  GIT_AUTHOR_DATE='2000-01-01T00:00:00Z' GIT_COMMITTER_DATE='2000-01-01T00:00:00Z' \
  g commit-tree "$tree" -m base)
g update-ref refs/sandbox-runtime/base "$commit"
new=$(mktemp -d)
git init -q --bare "$new/git"
git --git-dir="$new/git" -c safe.directory='*' fetch -q --no-tags "$old" \
  "refs/sandbox-runtime/base:refs/heads/$branch"
git --git-dir="$new/git" symbolic-ref HEAD "refs/heads/$branch"
git --git-dir="$new/git" config core.bare false
for key in core.filemode core.autocrlf core.symlinks core.ignorecase; do
  value=$(g config --get "$key" || true)
  [ -z "$value" ] || git --git-dir="$new/git" config "$key" "$value"
done
[ ! -f "$old/index" ] || cp -p "$old/index" "$new/git/index"
if [ -f "$old/info/exclude" ]; then
  mkdir -p "$new/git/info" && cp "$old/info/exclude" "$new/git/info/"
fi
rm -rf "$old"
mv "$new/git" "$old"
rmdir "$new"
g rev-parse HEAD
"""


def forget_history(sandbox: SandboxRuntime, *, cwd: str | None = None) -> str:
    """Make the repository at ``cwd`` (default: the workdir) know only its base commit.

    Returns the new base commit's id (the runtime's :meth:`base_commit` is refreshed).
    The working tree and the index are untouched, so ``git status`` and ``git diff`` say what
    they said before; the old object store (every other commit, branch, tag, stash, reflog
    and loose or packed object) is removed.  A repository with submodules keeps them as they
    are (their own history is theirs).
    """
    directory = sandbox.resolve(cwd) if cwd is not None else sandbox.workdir
    result = sandbox.exec(_SCRIPT, cwd=directory, timeout=600)
    if result.exit_code != 0:
        raise SandboxError(
            f"forgetting the history of {shlex.quote(directory)} failed: "
            f"{result.output.strip()[-500:]}"
        )
    sandbox.base_commit(cwd=directory, refresh=True)
    return result.stdout.strip().splitlines()[-1]
