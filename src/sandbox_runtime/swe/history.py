"""Forget the repository's history in the agent's sandbox, so the fix cannot be looked up.

A task's repository is often a clone at the base commit with the rest of its history still
inside: later commits reachable through ``git log --all``, a branch only ``packed-refs``
names, a stash, the reflog, or unreachable objects in a pack.  The fix is then one
``git show`` away, and a policy that finds it earns the reward by copying it: a hack that no
grading can tell from a fix, because it *is* the fix.  So the agent's sandbox gets a
repository that knows only the base: a shallow copy of the base commit alone (its id
unchanged, so benchmark scripts that check files out of it by id still work), in a new
object store, with the working tree and the index as they were.

Done right after setup, before the agent runs (so the commands that do it are trusted).

The cost is one ``git fetch --depth=1`` of the base commit into the new store, which packs
every object of the tree once: about as long as a ``git add`` of the checkout.
"""

from __future__ import annotations

import shlex

from sandbox_runtime._core.runtime import SandboxRuntime
from sandbox_runtime.errors import SandboxError

__all__ = ["forget_history"]

#: Rebuild ``.git`` as a shallow copy of ``HEAD`` alone: fetch that commit at depth 1 (so
#: only its tree's objects, its id unchanged) into a new repository, carry the index and the
#: local settings over, and swap the directories.  Remotes go with the old store.  No
#: template (``--template=``): its sample hooks never run, but each is a path the new store
#: adds, which docker's tree mark and change list then read one engine call at a time (13 of
#: a rollout's 17 reads, about 0.7 s of each).
_SCRIPT = r"""
set -eu
g() { git -c safe.directory='*' "$@"; }
top=$(g rev-parse --show-toplevel)
cd "$top"
old=$(g rev-parse --absolute-git-dir)
branch=$(g symbolic-ref -q --short HEAD || echo main)
g update-ref refs/sandbox-runtime/base HEAD
new=$(mktemp -d)
git init -q --bare --template= "$new/git"
git --git-dir="$new/git" -c safe.directory='*' -c protocol.file.allow=always fetch -q \
  --depth=1 --no-tags "file://$old" "refs/sandbox-runtime/base:refs/heads/$branch"
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

    Returns the base commit's id, the same as before (:meth:`base_commit` is refreshed).
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
