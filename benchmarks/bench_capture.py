"""What reading the agent's change from outside costs, next to ``git diff`` inside the sandbox.

Per backend: a repository of N files (``--files``, ``--size-mb`` in all), committed, then a
small edit (3 files changed, 1 added, 1 removed); times ``SandboxRuntime.diff()`` (git in the
sandbox: what grading used before) against ``mark_tree()`` + ``tree_changes()`` (the engine on
docker, the host on local: what grading uses now).  Prints one JSON line per backend.

    python benchmarks/bench_capture.py --backend docker --files 5000 --size-mb 50
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
import uuid
from collections.abc import Callable

import docker

from sandbox_runtime import SandboxRuntime
from sandbox_runtime._core.tree import TreeChanges, TreeMark

_MAKE = (
    "set -e; mkdir -p /testbed && cd /testbed && git init -q . && "
    "python3 - <<'EOF'\n"
    "import os\n"
    "n, size = {files}, {size}\n"
    "for i in range(n):\n"
    "    d = f'pkg{{i % 50}}'\n"
    "    os.makedirs(d, exist_ok=True)\n"
    "    with open(f'{{d}}/m{{i}}.py', 'wb') as f:\n"
    "        f.write((f'# {{i}}\\n' * (size // n // 5 + 1)).encode()[: size // n])\n"
    "EOF\n"
    "git add -A && git -c user.name=a -c user.email=a@b commit -qm base"
)
_EDIT = (
    "cd /testbed && echo '# edit {round}' >> pkg1/m1.py && echo x >> pkg2/m2.py && "
    "chmod +x pkg3/m3.py && echo new > new{round}.py && rm -f pkg4/m{gone}.py"
)


def _time(action: Callable[[], object]) -> float:
    began = time.perf_counter()
    action()
    return time.perf_counter() - began


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", default="docker")
    parser.add_argument("--image", default="sandbox-runtime-test/base:bookworm")
    parser.add_argument("--files", type=int, default=5000)
    parser.add_argument("--size-mb", type=float, default=50)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    fields: dict[str, object] = {"backend": args.backend, "workdir": "/testbed"}
    if args.backend == "docker":
        fields["image"] = args.image
    else:
        fields["options"] = {"isolation": "namespace"}
    size = int(args.size_mb * 1024 * 1024)
    diff_s: list[float] = []
    mark_s: list[float] = []
    changes_s: list[float] = []
    marks: list[TreeMark] = []
    found: list[TreeChanges] = []
    image = None
    if args.backend == "docker":
        # As in SWE images, the repository is in the image, not made by setup (the engine
        # then lists only what changes after the start).
        image = _baked_image(args.image, _MAKE.format(files=args.files, size=size))
        fields["image"] = image
    try:
        _measure(fields, args, size, image is None, (diff_s, mark_s, changes_s), marks, found)
    finally:
        if image is not None:
            docker.from_env().images.remove(image, force=True)
    print(
        json.dumps(
            {
                "backend": args.backend,
                "files": args.files,
                "size_mb": args.size_mb,
                "changed_paths": len(found[-1].changes),
                "git_diff_s": round(statistics.median(diff_s), 3),
                "mark_s": round(statistics.median(mark_s), 3),
                "changes_s": round(statistics.median(changes_s), 3),
            }
        )
    )


def _baked_image(base: str, script: str) -> str:
    """An image of ``base`` with the repository made by ``script`` in it."""
    client = docker.from_env()
    container = client.containers.run(base, ["sh", "-c", script], detach=True)
    try:
        assert container.wait(timeout=900)["StatusCode"] == 0, container.logs()
        tag = f"sandbox-runtime-bench/capture:{uuid.uuid4().hex[:8]}"
        container.commit(*tag.split(":"))
        return tag
    finally:
        container.remove(force=True)


def _measure(
    fields: dict[str, object],
    args: argparse.Namespace,
    size: int,
    make: bool,
    times: tuple[list[float], list[float], list[float]],
    marks: list[TreeMark],
    found: list[TreeChanges],
) -> None:
    diff_s, mark_s, changes_s = times
    with SandboxRuntime(**fields) as sandbox:
        if make:
            made = sandbox.exec(_MAKE.format(files=args.files, size=size), cwd="/", timeout=900)
            assert made.exit_code == 0, made.output
        for round_ in range(args.rounds):
            mark_s.append(_time(lambda: marks.append(sandbox.mark_tree())))
            sandbox.exec(_EDIT.format(round=round_, gone=4 + 50 * round_))
            changes_s.append(_time(lambda: found.append(sandbox.tree_changes(marks[-1]))))
            diff_s.append(_time(sandbox.diff))


if __name__ == "__main__":
    main()
